#!/bin/bash
source /tests/checks.sh
A=/app/docs.tar.gz
# the docs as shipped with the tests (the workspace copy may have been edited)
P=/tests/pristine/docs
expect_file archive "$A"
expect_eq members "$(tar -tzf "$A" 2>/dev/null)" "$(cd "$P" && ls -- *.md)" exact
X="$(mktemp -d)" && tar -xzf "$A" -C "$X" 2>/dev/null
expect_ok contents -- bash -c 'cd "$1" && for f in *.md; do cmp -s -- "$f" "$2/$f" || exit 1; done' _ "$P" "$X"
expect_file docs_kept /app/docs/draft.txt
finish
