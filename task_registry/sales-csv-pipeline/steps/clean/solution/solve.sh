#!/bin/bash
cd /app
mkdir -p out
echo "order_id,date,region,product_code,qty,unit_price" > out/sales_clean.csv
# hrbench:key-begin
awk -F, 'NR == 1 { next }
{
    for (i = 1; i <= NF; i++) { gsub(/^[ \t]+/, "", $i); gsub(/[ \t]+$/, "", $i) }
    if ($5 !~ /^[0-9]+$/ || $5 + 0 <= 0) next
    if (seen[$1]++) next
    p = $6; gsub(/\$/, "", p)
    printf "%s,%s,%s,%s,%d,%.2f\n", $1, $2, tolower($3), $4, $5, p
}' data/sales_raw.csv | sort -t, -k1,1n >> out/sales_clean.csv
# hrbench:key-end
