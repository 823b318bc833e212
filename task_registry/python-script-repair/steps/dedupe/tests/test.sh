#!/bin/bash
source /tests/checks.sh
# the input and the expected output are fixed here, before agent code runs (it may rewrite /tmp)
IN=$'zeta\nalpha\nzeta\nbeta\nalpha\n\ngamma\n\nbeta'
WANT="$(printf '%s\n' "$IN" | awk '!seen[$0]++')"
printf '%s\n' "$IN" > /tmp/in.txt
OUT="$(untrusted python3 /app/tools/dedupe.py < /tmp/in.txt 2>&1)"
expect_eq order_kept "$OUT" "$WANT" exact
expect_eq line_count "$(printf '%s\n' "$OUT" | wc -l)" "$(printf '%s\n' "$WANT" | wc -l)" int
finish
