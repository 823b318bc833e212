#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[7]zetolo mosota
[8]zetolo mosota
[9]zetolo pama
HRB_EOF
# hrbench:key-end
