#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[R9],leroza rerelu,bedi rerelu,leroza rerelu,bedi mobaza,bedi mobaza
[R10],leroza mobaza,leroza rerelu,leroza rerelu,leroza mobaza,bedi mobaza
[R11],bedi rerelu,bedi rerelu,bedi mobaza,leroza rerelu,bedi rerelu
HRB_EOF
# hrbench:key-end
