#!/bin/bash
source /tests/checks.sh
F=/app/out/users.txt
EXP="$(awk '{ for (i = 1; i < NF - 2; i++) if ($i == "Accepted" && $(i + 1) == "password" && $(i + 2) == "for") print $(i + 3) }' /tests/pristine/logs/auth.log | LC_ALL=C sort -u)"
expect_file users_file "$F"
expect_eq users "$(cat "$F" 2>/dev/null)" "$EXP" seq
expect_eq no_failed_only "$(grep -cxE 'root|admin|mallory|invalid' "$F" 2>/dev/null)" 0 int
finish
