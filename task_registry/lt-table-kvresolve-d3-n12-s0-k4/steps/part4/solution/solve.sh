#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[R9],kuro tabi,padu mumome,padu vibu,ligira tabi,divo tabi
[R10],bugedi miki,selo vuzi,kuro mumome,dumo nigudi,divo vuzi
[R11],mudetu tabi,divo mumome,padu tabi,fezutu gapo,fezutu vibu
HRB_EOF
# hrbench:key-end
