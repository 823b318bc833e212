#!/bin/bash
source /tests/checks.sh
S=/app/tools/duration.py
OUT="$(for d in 1h30m 2d 1h5m10s 45s 3m 1d2h3m4s; do untrusted python3 "$S" "$d" 2>&1; done)"
expect_eq values "$OUT" "5400 172800 3910 45 180 93784" seq
expect_fail invalid_text 'invalid duration' -- untrusted python3 "$S" abc
expect_fail invalid_unit 'invalid duration' -- untrusted python3 "$S" 10x
expect_ok exit_status_2 -- untrusted "python3 $S 5q >/dev/null 2>&1; test \$? -eq 2"
finish
