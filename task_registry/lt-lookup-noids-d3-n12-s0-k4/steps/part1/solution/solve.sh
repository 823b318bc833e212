#!/bin/bash
cd /app
# hrbench:key-begin
cat > output.txt <<'HRB_EOF'
pibisa lono
geba zofoge
zovo sene
HRB_EOF
# hrbench:key-end
