#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
vidoko senu
sebuma zigepa
timafe zuki
HRB_EOF
# hrbench:key-end
