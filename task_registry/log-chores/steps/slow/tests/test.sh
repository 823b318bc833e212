#!/bin/bash
source /tests/checks.sh
F=/app/out/slow.csv
EXP="$(awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } if (v["ms"] + 0 > 500) print v["req"] "," v["ms"] "," v["status"] }' /tests/pristine/logs/timing.log | LC_ALL=C sort -t, -k2,2nr -k1,1)"
expect_file slow_file "$F"
expect_eq header "$(head -n 1 "$F" 2>/dev/null)" "request,ms,status"
expect_eq requests "$(column "$F" request)" "$(printf '%s\n' "$EXP" | cut -d, -f1)" seq
expect_eq ms "$(column "$F" ms)" "$(printf '%s\n' "$EXP" | cut -d, -f2)" seq
expect_eq status "$(column "$F" status)" "$(printf '%s\n' "$EXP" | cut -d, -f3)" seq
finish
