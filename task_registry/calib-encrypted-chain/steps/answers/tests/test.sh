#!/bin/bash
source /tests/checks.sh
# expected answers ship with the tests (expected.txt); nothing is read back from the workspace but the answers
expect_file answers /app/answers.txt
# only a plain file is read: a symlink could point at expected.txt (/tests is mounted now), a FIFO would block
if [ -f /app/answers.txt ] && [ ! -L /app/answers.txt ]; then
    pass answers_is_a_plain_file
    for k in $(seq 1 10); do
        expect_eq "step$k" "$(field /app/answers.txt "step$k")" "$(field /tests/expected.txt "step$k")" exact
    done
else
    fail answers_is_a_plain_file "/app/answers.txt is not a plain file"
fi
finish
