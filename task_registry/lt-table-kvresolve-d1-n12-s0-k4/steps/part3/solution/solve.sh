#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[R6],bedi rerelu,leroza mobaza,leroza mobaza,leroza rerelu,bedi rerelu
[R7],bedi rerelu,bedi mobaza,leroza rerelu,leroza mobaza,bedi mobaza
[R8],leroza mobaza,leroza rerelu,bedi rerelu,leroza rerelu,leroza rerelu
HRB_EOF
# hrbench:key-end
