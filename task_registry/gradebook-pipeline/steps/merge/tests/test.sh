#!/bin/bash
source /tests/checks.sh
F=/app/build/scores.csv
EXP="$(awk -f /tests/grades.awk /tests/pristine/config/weights.ini /tests/pristine/raw/math.csv /tests/pristine/raw/physics.csv /tests/pristine/raw/chemistry.csv | LC_ALL=C sort -t, -k1,1)"
expect_file scores_file "$F"
expect_eq header "$(head -n 1 "$F" 2>/dev/null)" "student_id,name,math,physics,chemistry"
expect_eq student_ids "$(column "$F" student_id)" "$(printf '%s\n' "$EXP" | cut -d, -f1)" seq
expect_eq names "$(column "$F" name)" "$(printf '%s\n' "$EXP" | cut -d, -f2)" seq
expect_eq math "$(column "$F" math)" "$(printf '%s\n' "$EXP" | cut -d, -f3)" seq
expect_eq physics "$(column "$F" physics)" "$(printf '%s\n' "$EXP" | cut -d, -f4)" seq
expect_eq chemistry "$(column "$F" chemistry)" "$(printf '%s\n' "$EXP" | cut -d, -f5)" seq
expect_no_out names_trimmed '^ | $' -- bash -c "cut -d, -f2 $F"
finish
