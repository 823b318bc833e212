#!/bin/bash
source /tests/checks.sh
A=/app/backup/project.tar.gz
# the project as it was before this stage, shipped with the tests
P=/tests/pristine/project
EXP="$(cd "$P" && find . -type f ! -name '*.tmp' ! -path './cache/*' -printf 'project/%P\n' | LC_ALL=C sort)"
expect_file archive "$A"
expect_eq members "$(tar -tzf "$A" 2>/dev/null | sed 's#^\./##' | grep -v '/$' | LC_ALL=C sort)" "$EXP" exact
X="$(mktemp -d)" && tar -xzf "$A" -C "$X" 2>/dev/null
expect_ok contents_equal -- bash -c 'cd "$1" && find . -type f ! -name "*.tmp" ! -path "./cache/*" -print0 | while IFS= read -r -d "" f; do cmp -s -- "$f" "$2/project/$f" || { echo "differs: $f"; exit 1; }; done' _ "$P" "$X"
expect_file manifest_kept /app/backup/MANIFEST.tsv
finish
