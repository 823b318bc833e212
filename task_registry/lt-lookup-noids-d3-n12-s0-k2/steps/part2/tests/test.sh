#!/bin/bash
source /tests/checks.sh
# expected lines ship with the tests; output.txt is read (non-blank lines, stripped), never executed
expect_file output /app/output.txt
# a symlink could point at the expected lines themselves (/tests is mounted while this runs)
expect_ok output_is_a_plain_file -- test -f /app/output.txt -a ! -L /app/output.txt
GOT="$(awk 'NF { sub(/^[ \t]+/, ""); sub(/[ \t\r]+$/, ""); print }' /app/output.txt 2>/dev/null)"
expect_eq output_lines_1_to_12 "$GOT" "$(cat /tests/expected.txt)" exact
finish
