#!/bin/bash
cd /app
# hrbench:key-begin
cat > output.txt <<'HRB_EOF'
[1]peve naze
[2]ziro leba
[3]puvosi mubase
HRB_EOF
# hrbench:key-end
