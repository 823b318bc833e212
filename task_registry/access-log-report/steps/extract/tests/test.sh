#!/bin/bash
source /tests/checks.sh
F=/app/work/requests.tsv
EXP="$({ gzip -dc /tests/pristine/logs/access.log.1.gz; cat /tests/pristine/logs/access.log; } | awk -f /tests/parse.awk | LC_ALL=C sort -s -t "$(printf '\t')" -k1,1)"
expect_file requests_file "$F"
expect_eq header "$(head -n 1 "$F" 2>/dev/null | tr '\t' ' ')" "ts ip method path status bytes" exact
expect_eq row_count "$(rows "$F" ts)" "$(printf '%s\n' "$EXP" | grep -c .)" int
expect_eq ts "$(column "$F" ts)" "$(printf '%s\n' "$EXP" | cut -f1)" seq
expect_eq ip "$(column "$F" ip)" "$(printf '%s\n' "$EXP" | cut -f2)" seq
expect_eq method "$(column "$F" method)" "$(printf '%s\n' "$EXP" | cut -f3)" seq
expect_eq path "$(column "$F" path)" "$(printf '%s\n' "$EXP" | cut -f4)" seq
expect_eq status "$(column "$F" status)" "$(printf '%s\n' "$EXP" | cut -f5)" seq
expect_eq bytes "$(column "$F" bytes)" "$(printf '%s\n' "$EXP" | cut -f6)" seq
expect_eq tab_separated "$(awk -F'\t' 'NF != 6' "$F" 2>/dev/null | wc -l)" 0 int
finish
