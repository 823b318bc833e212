#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
gelona voniti
bibu peze
goti potumi
HRB_EOF
# hrbench:key-end
