#!/bin/bash
cd /app
# hrbench:key-begin
cat > output.txt <<'HRB_EOF'
timafe funi
pugi fafo
tusi zivale
sebuma busezu
mubene temake
sipa kivago
HRB_EOF
# hrbench:key-end
