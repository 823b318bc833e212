#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[R6],mudetu vibu,dumo tabi,fezutu mudalo,lode gapo,ligira dolo
[R7],bugedi dolo,kuro vuzi,fezutu miki,bugedi vibu,ligira nigudi
[R8],selo mudalo,mudetu mudalo,dumo nigudi,kuro mumome,fezutu vuzi
HRB_EOF
# hrbench:key-end
