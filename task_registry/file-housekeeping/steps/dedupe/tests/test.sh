#!/bin/bash
source /tests/checks.sh
D=/app/downloads
expect_eq unique_contents "$(cd "$D" && cat -- * 2>/dev/null | sort | uniq -d | wc -l)" 0 int
# keep rule: for each remaining file, no deleted sibling could have sorted first -> check the set of
# names is the set of byte-order-first names of each content group among the files still expected
expect_eq kept "$(cd "$D" && ls | LC_ALL=C sort)" "a_invoice.pdf
other.txt
report (1).pdf
unique.txt" seq
finish
