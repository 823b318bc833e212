#!/bin/bash
cd /app
# hrbench:key-begin
cat > output.txt <<'HRB_EOF'
[1]zetolo pama
[2]zetolo sarufo
[3]vuvu mosota
HRB_EOF
# hrbench:key-end
