#!/bin/bash
source /tests/checks.sh
printf 'zeta\nalpha\nzeta\nbeta\nalpha\n\ngamma\n\nbeta\n' > /tmp/in.txt
OUT="$(python3 /app/tools/dedupe.py < /tmp/in.txt 2>&1)"
expect_eq order_kept "$OUT" "$(awk '!seen[$0]++' /tmp/in.txt)" exact
expect_eq line_count "$(printf '%s\n' "$OUT" | wc -l)" "$(awk '!seen[$0]++' /tmp/in.txt | wc -l)" int
finish
