#!/bin/bash
cd /app/logs/old
# hrbench:key-begin
for f in *.log; do
    gzip -- "$f"
done
# hrbench:key-end
