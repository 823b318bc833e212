#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[4]sipu nabe
[5]lusaki fane
[6]ribigi vepeta
HRB_EOF
# hrbench:key-end
