#!/bin/bash
source /tests/checks.sh
# expected lines ship with the tests; output.txt is read (non-blank lines, stripped), never executed
expect_file output /app/output.txt
# only a plain file is read: a symlink could point at expected.txt (/tests is mounted now), a FIFO would block
if [ -f /app/output.txt ] && [ ! -L /app/output.txt ]; then
    pass output_is_a_plain_file
    GOT="$(awk 'NF { sub(/^[ \t]+/, ""); sub(/[ \t\r]+$/, ""); print }' /app/output.txt)"
    expect_eq output_lines_1_to_6 "$GOT" "$(cat /tests/expected.txt)" exact
else
    fail output_is_a_plain_file "/app/output.txt is not a plain file"
fi
finish
