#!/bin/bash
cd /app
mkdir -p out
# hrbench:key-begin
grep -o 'Accepted password for [^ ]*' logs/auth.log | awk '{ print $4 }' | sort -u > out/users.txt
# hrbench:key-end
