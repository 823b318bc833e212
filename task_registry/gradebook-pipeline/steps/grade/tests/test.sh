#!/bin/bash
source /tests/checks.sh
F=/app/build/grades.csv
EXP="$(awk -f /tests/grades.awk /tests/pristine/config/weights.ini /tests/pristine/raw/math.csv /tests/pristine/raw/physics.csv /tests/pristine/raw/chemistry.csv | LC_ALL=C sort -t, -k1,1)"
expect_file grades_file "$F"
expect_eq header "$(head -n 1 "$F" 2>/dev/null)" "student_id,name,weighted,letter"
expect_eq student_ids "$(column "$F" student_id)" "$(printf '%s\n' "$EXP" | cut -d, -f1)" seq
expect_eq weighted "$(column "$F" weighted)" "$(printf '%s\n' "$EXP" | cut -d, -f6)" seq
expect_eq letters "$(column "$F" letter)" "$(printf '%s\n' "$EXP" | cut -d, -f7)" seq
expect_eq one_decimal "$(column "$F" weighted | grep -cvE '^[0-9]+\.[0-9]$')" 0 int
expect_file scores_kept /app/build/scores.csv
finish
