#!/bin/bash
source /tests/checks.sh
F=/app/out/report.md
CLEAN="$(awk -f /tests/clean.awk /tests/pristine/data/sales_raw.csv)"
EXP="$(printf '%s\n' "$CLEAN" \
  | awk -F, 'FILENAME != "-" { if (FNR > 1) cat[$1] = $3; next }
             { c = ($4 in cat) ? cat[$4] : "unknown"; u[c] += $5; r[c] += $5 * $6 }
             END { for (k in u) printf "%s,%d,%.2f\n", k, u[k], r[k] }' /tests/pristine/data/products.csv - \
  | LC_ALL=C sort -t, -k1,1)"
TOP="$(printf '%s\n' "$CLEAN" | awk -F, '{ r[$3] += $5 * $6 } END { for (k in r) printf "%s,%.2f\n", k, r[k] }' | sort -t, -k2,2nr | head -n 1 | cut -d, -f1)"
TOTAL="$(printf '%s\n' "$CLEAN" | awk -F, '{ s += $5 * $6 } END { printf "%.2f", s }')"
TABLE="$(grep '|' "$F" 2>/dev/null)"
expect_file report_file "$F"
expect_eq title "$(head -n 1 "$F" 2>/dev/null)" "# Sales report"
expect_eq table_categories "$(printf '%s\n' "$TABLE" | column - category)" "$(printf '%s\n' "$EXP" | cut -d, -f1)" seq
expect_eq table_units "$(printf '%s\n' "$TABLE" | column - units)" "$(printf '%s\n' "$EXP" | cut -d, -f2)" seq
expect_eq table_revenue "$(printf '%s\n' "$TABLE" | column - revenue)" "$(printf '%s\n' "$EXP" | cut -d, -f3)" seq
expect_eq grand_total "$(field "$F" "grand total")" "$TOTAL" num:0.005
expect_eq top_region "$(field "$F" "top region")" "$TOP"
expect_ok earlier_outputs -- test -s /app/out/category_totals.csv -a -s /app/out/region_totals.csv
finish
