#!/bin/bash
source /tests/checks.sh
A=/app/backup/project.tar.gz
EXP="$(cd /app/project && find . -type f ! -name '*.tmp' ! -path './cache/*' -printf 'project/%P\n' | LC_ALL=C sort)"
expect_file archive "$A"
expect_eq members "$(tar -tzf "$A" 2>/dev/null | sed 's#^\./##' | grep -v '/$' | LC_ALL=C sort)" "$EXP" exact
mkdir -p /tmp/x && tar -xzf "$A" -C /tmp/x 2>/dev/null
expect_ok contents_equal -- bash -c 'cd /app/project && find . -type f ! -name "*.tmp" ! -path "./cache/*" -print0 | while IFS= read -r -d "" f; do cmp -s -- "$f" "/tmp/x/project/$f" || { echo "differs: $f"; exit 1; }; done'
expect_file manifest_kept /app/backup/MANIFEST.tsv
finish
