#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
zedade potumi
ziseva lifu
liredu zefu
HRB_EOF
# hrbench:key-end
