#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
beme filasu
veku tekevu
gasuzo nurevo
HRB_EOF
# hrbench:key-end
