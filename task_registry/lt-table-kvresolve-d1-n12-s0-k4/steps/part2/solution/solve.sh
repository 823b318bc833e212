#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[R3],bedi rerelu,leroza rerelu,bedi rerelu,leroza rerelu,leroza rerelu
[R4],leroza mobaza,leroza rerelu,leroza rerelu,bedi mobaza,bedi rerelu
[R5],leroza rerelu,bedi mobaza,bedi mobaza,bedi rerelu,leroza rerelu
HRB_EOF
# hrbench:key-end
