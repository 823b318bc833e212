#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[R3],bugedi gule,kuro tabi,mudetu vibu,divo vibu,kuro mudalo
[R4],padu gapo,lode nigudi,dumo vibu,lode gule,kuro dolo
[R5],lode tabi,selo dolo,fezutu gapo,mudetu nigudi,fezutu vuzi
HRB_EOF
# hrbench:key-end
