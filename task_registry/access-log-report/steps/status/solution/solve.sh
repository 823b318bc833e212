#!/bin/bash
cd /app
# hrbench:key-begin
awk -F'\t' 'NR > 1 { n++; c[substr($5, 1, 1)]++ }
END {
    printf "total: %d\n2xx: %d\n3xx: %d\n4xx: %d\n5xx: %d\n", n, c[2], c[3], c[4], c[5]
    printf "error_rate: %.3f\n", (c[4] + c[5]) / n
}' work/requests.tsv > work/status_counts.txt
# hrbench:key-end
