#!/bin/bash
cd /app
echo "region,orders,revenue" > out/region_totals.csv
# hrbench:key-begin
awk -F, 'NR > 1 { n[$3]++; r[$3] += $5 * $6 }
END { for (k in n) printf "%s,%d,%.2f\n", k, n[k], r[k] }' out/sales_clean.csv \
  | sort -t, -k3,3nr >> out/region_totals.csv
# hrbench:key-end
