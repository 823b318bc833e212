#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[4]zetolo pama
[5]zetolo mosota
[6]zetolo baruno
HRB_EOF
# hrbench:key-end
