#!/bin/bash
source /tests/checks.sh
S=/app/bin/count_words.sh
D="/tmp/some dir"; mkdir -p "$D"
F="$D/sample text.txt"
printf 'the quick brown fox\njumps over   the lazy dog\nabcdefgh zyxwvuts\n\nend\n' > "$F"
G="$D/ties.txt"
printf 'aa bbbb cccc\ndddd e\n' > "$G"
OUT="$(bash "$S" "$F" 2>&1)"
expect_eq lines "$(printf '%s\n' "$OUT" | field - lines)" "$(wc -l < "$F")" int
expect_eq words "$(printf '%s\n' "$OUT" | field - words)" "$(wc -w < "$F")" int
expect_eq longest "$(printf '%s\n' "$OUT" | field - longest)" abcdefgh exact
expect_eq three_lines "$(printf '%s\n' "$OUT" | grep -c .)" 3 int
expect_eq longest_tie "$(bash "$S" "$G" 2>&1 | field - longest)" bbbb exact
expect_eq words_tie "$(bash "$S" "$G" 2>&1 | field - words)" "$(wc -w < "$G")" int
finish
