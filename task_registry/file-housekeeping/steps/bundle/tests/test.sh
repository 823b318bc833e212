#!/bin/bash
source /tests/checks.sh
A=/app/docs.tar.gz
expect_file archive "$A"
expect_eq members "$(tar -tzf "$A" 2>/dev/null)" "$(cd /app/docs && ls -- *.md)" exact
mkdir -p /tmp/x && tar -xzf "$A" -C /tmp/x 2>/dev/null
expect_ok contents -- bash -c 'cd /app/docs && for f in *.md; do cmp -s -- "$f" "/tmp/x/$f" || exit 1; done'
expect_file docs_kept /app/docs/draft.txt
finish
