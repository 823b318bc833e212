#!/bin/bash
cd /app
mkdir -p out
# hrbench:key-begin
grep -E '^[0-9-]+ [0-9:]+ \[ERROR\]' logs/app.log > out/errors.txt
# hrbench:key-end
{
  echo "total: $(grep -c . out/errors.txt)"
  echo "first: $(head -n 1 out/errors.txt | cut -d' ' -f1-2)"
  echo "last: $(tail -n 1 out/errors.txt | cut -d' ' -f1-2)"
} > out/error_summary.txt
