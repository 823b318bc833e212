#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[R6],mudetu vibu,dumo tabi,fezutu mudalo,lode gapo,ligira dolo
[R7],bugedi dolo,kuro vuzi,fezutu miki,bugedi vibu,ligira nigudi
[R8],selo mudalo,mudetu mudalo,dumo nigudi,kuro mumome,fezutu vuzi
[R9],kuro tabi,padu mumome,padu vibu,ligira tabi,divo tabi
[R10],bugedi miki,selo vuzi,kuro mumome,dumo nigudi,divo vuzi
[R11],mudetu tabi,divo mumome,padu tabi,fezutu gapo,fezutu vibu
HRB_EOF
# hrbench:key-end
