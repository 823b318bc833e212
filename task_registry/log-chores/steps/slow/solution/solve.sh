#!/bin/bash
cd /app
mkdir -p out
echo "request,ms,status" > out/slow.csv
# hrbench:key-begin
sed -E 's/.* req=([^ ]+) ms=([0-9]+) status=([0-9]+).*/\1,\2,\3/' logs/timing.log \
  | awk -F, '$2 > 500' | sort -t, -k2,2nr -k1,1 >> out/slow.csv
# hrbench:key-end
