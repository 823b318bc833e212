#!/bin/bash
source /tests/checks.sh
D=/app/downloads
expect_eq unique_contents "$(cd "$D" && cat -- * 2>/dev/null | sort | uniq -d | wc -l)" 0 int
# keep rule: for each content group the byte-order-first name stays (computed from the pristine
# downloads shipped with the tests), and what stays keeps its content
expect_eq kept "$(cd "$D" && ls | LC_ALL=C sort)" "a_invoice.pdf
other.txt
report (1).pdf
unique.txt" seq
expect_ok contents_unchanged -- bash -c 'cd /tests/pristine/downloads && for f in "a_invoice.pdf" "other.txt" "report (1).pdf" "unique.txt"; do cmp -s -- "$f" "/app/downloads/$f" || { echo "changed: $f"; exit 1; }; done'
finish
