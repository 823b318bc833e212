#!/bin/bash
source /tests/checks.sh
F=/app/work/top_paths.csv
EXP="$({ gzip -dc /tests/pristine/logs/access.log.1.gz; cat /tests/pristine/logs/access.log; } | awk -f /tests/parse.awk \
  | awk -F'\t' '{ h[$4]++; if ($5 >= 400) e[$4]++; b[$4] += $6 } END { for (p in h) printf "%s,%d,%d,%d\n", p, h[p], e[p], b[p] }' \
  | LC_ALL=C sort -t, -k2,2nr -k1,1 | head -n 5)"
expect_file top_file "$F"
expect_eq header "$(head -n 1 "$F" 2>/dev/null)" "path,hits,errors,bytes"
expect_eq paths "$(column "$F" path)" "$(printf '%s\n' "$EXP" | cut -d, -f1)" seq
expect_eq hits "$(column "$F" hits)" "$(printf '%s\n' "$EXP" | cut -d, -f2)" seq
expect_eq errors "$(column "$F" errors)" "$(printf '%s\n' "$EXP" | cut -d, -f3)" seq
expect_eq bytes "$(column "$F" bytes)" "$(printf '%s\n' "$EXP" | cut -d, -f4)" seq
expect_file counts_kept /app/work/status_counts.txt
finish
