#!/bin/bash
source /tests/checks.sh
F=/app/out/region_totals.csv
EXP="$(awk -f /tests/clean.awk /tests/pristine/data/sales_raw.csv \
  | awk -F, '{ n[$3]++; r[$3] += $5 * $6 } END { for (k in n) printf "%s,%d,%.2f\n", k, n[k], r[k] }' \
  | sort -t, -k3,3nr)"
expect_file totals_file "$F"
expect_eq header "$(head -n 1 "$F" 2>/dev/null)" "region,orders,revenue"
expect_eq region_order "$(column "$F" region)" "$(printf '%s\n' "$EXP" | cut -d, -f1)" seq
while IFS=, read -r reg n rev; do
    expect_eq "orders_$reg" "$(cell "$F" region "$reg" orders)" "$n" int
    expect_eq "revenue_$reg" "$(cell "$F" region "$reg" revenue)" "$rev" num:0.005
done <<< "$EXP"
expect_eq revenue_format "$(column "$F" revenue | grep -cvE '^[0-9]+\.[0-9][0-9]$')" 0 int
expect_ok clean_kept -- test -s /app/out/sales_clean.csv
finish
