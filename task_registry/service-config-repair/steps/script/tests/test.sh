#!/bin/bash
source /tests/checks.sh
S=/app/bin/count_words.sh
# inputs and expected counts are fixed here, before agent code runs (it may rewrite /tmp)
D="/tmp/some dir"; mkdir -p "$D"
F="$D/sample text.txt"
printf 'the quick brown fox\njumps over   the lazy dog\nabcdefgh zyxwvuts\n\nend\n' > "$F"
G="$D/ties.txt"
printf 'aa bbbb cccc\ndddd e\n' > "$G"
F_LINES="$(wc -l < "$F")"; F_WORDS="$(wc -w < "$F")"; G_WORDS="$(wc -w < "$G")"
OUT="$(untrusted bash "$S" "$F" 2>&1)"
OUT_G="$(untrusted bash "$S" "$G" 2>&1)"
expect_eq lines "$(printf '%s\n' "$OUT" | field - lines)" "$F_LINES" int
expect_eq words "$(printf '%s\n' "$OUT" | field - words)" "$F_WORDS" int
expect_eq longest "$(printf '%s\n' "$OUT" | field - longest)" abcdefgh exact
expect_eq three_lines "$(printf '%s\n' "$OUT" | grep -c .)" 3 int
expect_eq longest_tie "$(printf '%s\n' "$OUT_G" | field - longest)" bbbb exact
expect_eq words_tie "$(printf '%s\n' "$OUT_G" | field - words)" "$G_WORDS" int
finish
