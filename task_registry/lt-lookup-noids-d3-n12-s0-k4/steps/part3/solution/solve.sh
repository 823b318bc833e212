#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
geka peze
kusu gadoli
neti zeva
HRB_EOF
# hrbench:key-end
