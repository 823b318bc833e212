#!/bin/bash
cd /app
# hrbench:key-begin
cat > output.txt <<'HRB_EOF'
,[C0],[C1],[C2],[C3],[C4]
[R0],bedi mobaza,bedi rerelu,bedi mobaza,leroza rerelu,leroza rerelu
[R1],bedi mobaza,leroza mobaza,leroza mobaza,leroza mobaza,bedi mobaza
[R2],bedi mobaza,bedi mobaza,leroza mobaza,bedi rerelu,bedi mobaza
[R3],bedi rerelu,leroza rerelu,bedi rerelu,leroza rerelu,leroza rerelu
[R4],leroza mobaza,leroza rerelu,leroza rerelu,bedi mobaza,bedi rerelu
[R5],leroza rerelu,bedi mobaza,bedi mobaza,bedi rerelu,leroza rerelu
HRB_EOF
# hrbench:key-end
