#!/bin/bash
source /tests/checks.sh
A=/app/dist/report.tar.gz
expect_file archive "$A"
expect_ok gzip_ok -- gzip -t "$A"
expect_eq members "$(tar -tzf "$A" 2>/dev/null | sed 's#^\./##' | grep -v '/$')" "report/status_counts.txt,report/top_paths.csv,report/SHA256SUMS" set
mkdir -p /tmp/x && tar -xzf "$A" -C /tmp/x 2>/dev/null
expect_ok checksums_verify -- bash -c 'cd /tmp/x/report && sha256sum -c --strict SHA256SUMS'
expect_eq sums_cover "$(awk '{ print $2 }' /tmp/x/report/SHA256SUMS 2>/dev/null | sed 's/^\*//')" "status_counts.txt,top_paths.csv" set
expect_ok counts_match -- cmp /tmp/x/report/status_counts.txt /app/work/status_counts.txt
expect_ok top_match -- cmp /tmp/x/report/top_paths.csv /app/work/top_paths.csv
# the shipped numbers are the real ones
EXP="$({ gzip -dc /tests/pristine/logs/access.log.1.gz; cat /tests/pristine/logs/access.log; } | awk -f /tests/parse.awk)"
expect_eq shipped_total "$(field /tmp/x/report/status_counts.txt total)" "$(printf '%s\n' "$EXP" | grep -c .)" int
finish
