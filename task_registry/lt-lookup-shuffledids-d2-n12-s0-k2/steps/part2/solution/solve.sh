#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[7]meza dibule
[8]tuke sova
[9]tuke liki
[10]figuga gibeto
[11]zufo gisosu
[12]fedoti pebu
HRB_EOF
# hrbench:key-end
