#!/bin/bash
source /tests/checks.sh
L=/app/ledger.py
# expected values come from the pristine export and rules shipped with the tests
EXP="$(python3 /tests/expected.py)"
# the busiest month of the export
MONTH="$(printf '%s\n' "$EXP" | cut -c1-7 | sort | uniq -c | sort -k1,1nr -k2 | awk 'NR == 1 { print $2 }')"
WANT="$(printf '%s\n' "$EXP" | awk -F'|' -v m="$MONTH" 'substr($1, 1, 7) == m { s[$2] += $3 }
  END { for (k in s) printf "%s\t%d\n", k, s[k] }' | LC_ALL=C sort -t "$(printf '\t')" -k2,2nr -k1,1)"
OUT="$(untrusted python3 "$L" summary --month "$MONTH" 2>&1)"
expect_eq categories_in_order "$(printf '%s\n' "$OUT" | grep -v '^total:' | cut -d: -f1)" "$(printf '%s\n' "$WANT" | cut -f1)" seq
while IFS="$(printf '\t')" read -r cat cents; do
    expect_eq "sum_${cat// /_}" "$(printf '%s\n' "$OUT" | field - "$cat")" "$(awk -v c="$cents" 'BEGIN { printf "%.2f", c / 100 }')" exact
done <<< "$WANT"
expect_eq month_total "$(printf '%s\n' "$OUT" | tail -n 1)" "total: $(printf '%s\n' "$WANT" | awk -F'\t' '{ s += $2 } END { printf "%.2f", s / 100 }')"
expect_out empty_month '^total:0\.00$' -- untrusted python3 "$L" summary --month 1999-01
expect_out total_still_works '^total:[0-9]+\.[0-9][0-9]$' -- untrusted python3 "$L" total
finish
