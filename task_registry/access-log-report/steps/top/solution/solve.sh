#!/bin/bash
cd /app
echo "path,hits,errors,bytes" > work/top_paths.csv
# hrbench:key-begin
awk -F'\t' 'NR > 1 { h[$4]++; if ($5 >= 400) e[$4]++; b[$4] += $6 }
END { for (p in h) printf "%s,%d,%d,%d\n", p, h[p], e[p], b[p] }' work/requests.tsv \
  | LC_ALL=C sort -t, -k2,2nr -k1,1 | head -n 5 >> work/top_paths.csv
# hrbench:key-end
