#!/bin/bash
cd /app
# hrbench:key-begin
cat > output.txt <<'HRB_EOF'
,[C0],[C1],[C2],[C3],[C4]
[R0],bedi mobaza,bedi rerelu,bedi mobaza,leroza rerelu,leroza rerelu
[R1],bedi mobaza,leroza mobaza,leroza mobaza,leroza mobaza,bedi mobaza
[R2],bedi mobaza,bedi mobaza,leroza mobaza,bedi rerelu,bedi mobaza
HRB_EOF
# hrbench:key-end
