#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[10]rupusu galiri
[11]gofonu nitibu
[12]tegu nabe
HRB_EOF
# hrbench:key-end
