#!/bin/bash
source /tests/checks.sh
F=/app/build/grades.json
EXP="$(awk -f /tests/grades.awk /tests/pristine/config/weights.ini /tests/pristine/raw/math.csv /tests/pristine/raw/physics.csv /tests/pristine/raw/chemistry.csv | LC_ALL=C sort -t, -k6,6nr -k1,1)"
expect_file json_file "$F"
expect_ok valid_json -- python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert isinstance(d, list) and all(isinstance(o["rank"], int) and isinstance(o["weighted"], (int, float)) for o in d)' "$F"
TABLE="$(table "$F" 2>/dev/null)"
expect_eq order_by_rank "$(printf '%s\n' "$TABLE" | column - student_id)" "$(printf '%s\n' "$EXP" | cut -d, -f1)" seq
expect_eq ranks "$(printf '%s\n' "$TABLE" | column - rank)" "$(seq 1 "$(printf '%s\n' "$EXP" | grep -c .)")" seq
expect_eq weighted "$(printf '%s\n' "$TABLE" | column - weighted | awk '{ printf "%.1f\n", $1 }')" "$(printf '%s\n' "$EXP" | cut -d, -f6)" seq
expect_eq names "$(printf '%s\n' "$TABLE" | column - name)" "$(printf '%s\n' "$EXP" | cut -d, -f2)" seq
expect_eq letters_json "$(printf '%s\n' "$TABLE" | column - letter)" "$(printf '%s\n' "$EXP" | cut -d, -f7)" seq
for l in A B C F; do
    expect_eq "count_$l" "$(field /app/build/letters.txt "$l")" "$(printf '%s\n' "$EXP" | cut -d, -f7 | grep -cx "$l")" int
done
expect_file grades_kept /app/build/grades.csv
finish
