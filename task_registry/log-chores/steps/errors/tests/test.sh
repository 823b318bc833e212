#!/bin/bash
source /tests/checks.sh
EXP="$(awk '$3 == "[ERROR]"' /tests/pristine/logs/app.log)"
expect_file errors_file /app/out/errors.txt
expect_eq error_lines "$(cat /app/out/errors.txt 2>/dev/null)" "$EXP" exact
S=/app/out/error_summary.txt
expect_eq total "$(field "$S" total)" "$(printf '%s\n' "$EXP" | grep -c .)" int
expect_eq first "$(field "$S" first)" "$(printf '%s\n' "$EXP" | head -n 1 | cut -d' ' -f1-2)"
expect_eq last "$(field "$S" last)" "$(printf '%s\n' "$EXP" | tail -n 1 | cut -d' ' -f1-2)"
finish
