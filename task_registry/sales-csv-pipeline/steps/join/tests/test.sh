#!/bin/bash
source /tests/checks.sh
F=/app/out/category_totals.csv
EXP="$(awk -f /tests/clean.awk /tests/pristine/data/sales_raw.csv \
  | awk -F, 'FILENAME != "-" { if (FNR > 1) cat[$1] = $3; next }
             { c = ($4 in cat) ? cat[$4] : "unknown"; u[c] += $5; r[c] += $5 * $6 }
             END { for (k in u) printf "%s,%d,%.2f\n", k, u[k], r[k] }' /tests/pristine/data/products.csv - \
  | LC_ALL=C sort -t, -k1,1)"
expect_file category_file "$F"
expect_eq header "$(head -n 1 "$F" 2>/dev/null)" "category,units,revenue"
expect_eq categories "$(column "$F" category)" "$(printf '%s\n' "$EXP" | cut -d, -f1)" seq
while IFS=, read -r cat units rev; do
    expect_eq "units_$cat" "$(cell "$F" category "$cat" units)" "$units" int
    expect_eq "revenue_$cat" "$(cell "$F" category "$cat" revenue)" "$rev" num:0.005
done <<< "$EXP"
expect_eq revenue_format "$(column "$F" revenue | grep -cvE '^[0-9]+\.[0-9][0-9]$')" 0 int
expect_ok earlier_outputs -- test -s /app/out/sales_clean.csv -a -s /app/out/region_totals.csv
finish
