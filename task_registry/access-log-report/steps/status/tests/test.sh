#!/bin/bash
source /tests/checks.sh
F=/app/work/status_counts.txt
EXP="$({ gzip -dc /tests/pristine/logs/access.log.1.gz; cat /tests/pristine/logs/access.log; } | awk -f /tests/parse.awk)"
cnt() { printf '%s\n' "$EXP" | awk -F'\t' -v c="$1" 'substr($5, 1, 1) == c' | grep -c .; }
TOTAL="$(printf '%s\n' "$EXP" | grep -c .)"
expect_file counts_file "$F"
expect_eq keys_in_order "$(sed 's/:.*//' "$F" 2>/dev/null)" "total 2xx 3xx 4xx 5xx error_rate" seq
expect_eq total "$(field "$F" total)" "$TOTAL" int
for c in 2 3 4 5; do expect_eq "${c}xx" "$(field "$F" "${c}xx")" "$(cnt $c)" int; done
RATE="$(awk -v e="$(( $(cnt 4) + $(cnt 5) ))" -v t="$TOTAL" 'BEGIN { printf "%.3f", e / t }')"
expect_eq error_rate "$(field "$F" error_rate)" "$RATE" exact
expect_file requests_kept /app/work/requests.tsv
finish
