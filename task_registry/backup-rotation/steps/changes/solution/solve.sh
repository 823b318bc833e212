#!/bin/bash
cd /app
# hrbench:key-begin
tar -xzf incoming/update.tar.gz -C /app
# hrbench:key-end
cd project
find . -type f ! -name '*.tmp' ! -path './cache/*' -printf '%P\n' | LC_ALL=C sort | while IFS= read -r f; do
    old="$(awk -F'\t' -v p="$f" 'NR > 1 && $1 == p { print $3 }' /app/backup/MANIFEST.tsv)"
    new="$(sha256sum -- "$f" | cut -d' ' -f1)"
    if [ -z "$old" ]; then echo "A $f"; elif [ "$old" != "$new" ]; then echo "M $f"; fi
done > /app/backup/changes.txt
