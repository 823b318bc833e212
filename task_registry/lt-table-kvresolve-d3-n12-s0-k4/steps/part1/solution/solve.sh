#!/bin/bash
cd /app
# hrbench:key-begin
cat > output.txt <<'HRB_EOF'
,[C0],[C1],[C2],[C3],[C4]
[R0],kuro mumome,lode mumome,divo vuzi,kuro miki,dumo gapo
[R1],mudetu gapo,divo vibu,padu nigudi,divo mumome,fezutu mudalo
[R2],divo nigudi,selo miki,fezutu mudalo,bugedi gapo,padu gule
HRB_EOF
# hrbench:key-end
