#!/bin/bash
cd /app
# hrbench:key-begin
cat > output.txt <<'HRB_EOF'
pibisa lono
geba zofoge
zovo sene
zedade potumi
ziseva lifu
liredu zefu
HRB_EOF
# hrbench:key-end
