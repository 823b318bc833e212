#!/bin/bash
cd /app
# hrbench:key-begin
cat > output.txt <<'HRB_EOF'
timafe funi
pugi fafo
tusi zivale
HRB_EOF
# hrbench:key-end
