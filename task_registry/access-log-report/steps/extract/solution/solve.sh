#!/bin/bash
cd /app
mkdir -p work
printf 'ts\tip\tmethod\tpath\tstatus\tbytes\n' > work/requests.tsv
# hrbench:key-begin
{ gzip -dc logs/access.log.1.gz; cat logs/access.log; } | awk '
$4 ~ /^\[[0-9][0-9]\/[A-Z][a-z][a-z]\/[0-9][0-9][0-9][0-9]:[0-9][0-9]:[0-9][0-9]:[0-9][0-9]$/ && $6 ~ /^"[A-Z]+$/ && $9 ~ /^[0-9][0-9][0-9]$/ {
    split(substr($4, 2), a, /[\/:]/)
    mon = (index("JanFebMarAprMayJunJulAugSepOctNovDec", a[2]) + 2) / 3
    p = $7; sub(/\?.*/, "", p)
    printf "%s-%02d-%sT%s:%s:%s\t%s\t%s\t%s\t%s\t%s\n", a[3], mon, a[1], a[4], a[5], a[6], $1, substr($6, 2), p, $9, ($10 == "-") ? 0 : $10
}' | sort -s -t "$(printf '\t')" -k1,1 >> work/requests.tsv
# hrbench:key-end
