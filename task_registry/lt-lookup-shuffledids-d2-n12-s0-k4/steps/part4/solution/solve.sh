#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[10]figuga gibeto
[11]zufo gisosu
[12]fedoti pebu
HRB_EOF
# hrbench:key-end
