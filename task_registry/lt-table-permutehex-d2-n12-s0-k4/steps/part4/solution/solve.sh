#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[R1],bb45,f152,a063288af45d7861b38a409a,1fff0dc36c8f09ad7df26f849e7db,506e41c61a40ab216a8f2cb7b9a273a7d89c
[R10],90b50796b,cedd0b44389ef0e21,f45d2ca27235d62c7,52d463a358bc484d772f9837a2ecf7e0a,6b15a7f33f3e8142bc1518d48c8d
[R11],3bfecf07df74dd7e1a15559d6f65c64c2,e9957916f4c98e85b5163b566e6c2,1dc4b3133dddd3e293bd271,d16c4966,2647cd58de7cd5
HRB_EOF
# hrbench:key-end
