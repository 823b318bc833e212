#!/bin/bash
cd /app
# hrbench:key-begin
cat > output.txt <<'HRB_EOF'
,[C4],[C1],[C2],[C3],[C0]
[R0],f41ce93e47ba9a15fc876cd,f291137eacd0fd4e69102711319f4bc4,80f2f4f7ef0fc0a903efcd5e675619e,2a4ccdfaf5315f1,bc2b1
[R5],8cc10e20c72dc8bc,4c4db3fb7,7b2f31523e0961d071,348021c6350806c95749,2d8f
[R2],746db9282211680feb4311d6fe622,f704db797d67d,59ab1cbd053394fc95c6ae8da1,b7bcce596b7b8e76e4fce80,4197966886a02c9b7ffb3366c96997cf21a
HRB_EOF
# hrbench:key-end
