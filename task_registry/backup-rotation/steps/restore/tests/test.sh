#!/bin/bash
source /tests/checks.sh
# the project as it was before this stage, shipped with the tests
P=/tests/pristine/project
EXP="$(cd "$P" && find . -type f ! -name '*.tmp' ! -path './cache/*' -printf '%P\n' | LC_ALL=C sort)"
expect_eq restored_files "$(cd /app/restore/project 2>/dev/null && find . -type f -printf '%P\n' | LC_ALL=C sort)" "$EXP" exact
expect_ok restored_equal -- bash -c 'cd "$1" && find . -type f ! -name "*.tmp" ! -path "./cache/*" -print0 | while IFS= read -r -d "" f; do cmp -s -- "$f" "/app/restore/project/$f" || { echo "differs: $f"; exit 1; }; done' _ "$P"
expect_eq checked "$(field /app/backup/verify.txt checked)" "$(printf '%s\n' "$EXP" | grep -c .)" int
expect_eq mismatches "$(field /app/backup/verify.txt mismatches)" 0 int
expect_file archive_kept /app/backup/project.tar.gz
finish
