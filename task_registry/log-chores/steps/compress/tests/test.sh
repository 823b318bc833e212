#!/bin/bash
source /tests/checks.sh
D=/app/logs/old
n=0
while read -r sum name; do
    n=$((n + 1))
    expect_file "gz_$n" "$D/$name.gz"
    expect_eq "content_$n" "$(gzip -dc -- "$D/$name.gz" 2>/dev/null | sha256sum | cut -d' ' -f1)" "$sum" exact
    expect_fail "plain_gone_$n" '' -- test -e "$D/$name"
done < /tests/original.sha256
expect_eq readme_kept "$(cat "$D/README.txt" 2>/dev/null)" "Old logs. Only *.log files are to be compressed." exact
expect_eq no_other_gz "$(find "$D" -name '*.gz' ! -name '*.log.gz' | wc -l)" 0 int
finish
