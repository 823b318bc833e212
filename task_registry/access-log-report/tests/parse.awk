# Reference parser: combined-log lines on stdin -> ts<TAB>ip<TAB>method<TAB>path<TAB>status<TAB>bytes
$4 ~ /^\[[0-9][0-9]\/[A-Z][a-z][a-z]\/[0-9][0-9][0-9][0-9]:[0-9][0-9]:[0-9][0-9]:[0-9][0-9]$/ && $6 ~ /^"[A-Z]+$/ && $9 ~ /^[0-9][0-9][0-9]$/ {
    d = substr($4, 2); split(d, a, /[\/:]/)
    mon = (index("JanFebMarAprMayJunJulAugSepOctNovDec", a[2]) + 2) / 3
    ts = sprintf("%s-%02d-%sT%s:%s:%s", a[3], mon, a[1], a[4], a[5], a[6])
    m = substr($6, 2); p = $7; sub(/\?.*/, "", p)
    b = ($10 == "-") ? 0 : $10
    printf "%s\t%s\t%s\t%s\t%s\t%s\n", ts, $1, m, p, $9, b
}
