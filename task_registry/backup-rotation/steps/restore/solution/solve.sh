#!/bin/bash
cd /app
rm -rf restore && mkdir -p restore
# hrbench:key-begin
tar -xzf backup/project.tar.gz -C restore
# hrbench:key-end
checked=0; bad=0
while IFS="$(printf '\t')" read -r p size sum; do
    checked=$((checked + 1))
    [ "$(sha256sum -- "restore/project/$p" 2>/dev/null | cut -d' ' -f1)" = "$sum" ] || bad=$((bad + 1))
done < <(tail -n +2 backup/MANIFEST.tsv)
printf 'checked: %s\nmismatches: %s\n' "$checked" "$bad" > backup/verify.txt
