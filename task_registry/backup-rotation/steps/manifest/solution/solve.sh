#!/bin/bash
cd /app/project
mkdir -p /app/backup
printf 'path\tsize\tsha256\n' > /app/backup/MANIFEST.tsv
# hrbench:key-begin
find . -type f ! -name '*.tmp' ! -path './cache/*' -printf '%P\n' | LC_ALL=C sort | while IFS= read -r f; do
    printf '%s\t%s\t%s\n' "$f" "$(stat -c %s -- "$f")" "$(sha256sum -- "$f" | cut -d' ' -f1)"
done >> /app/backup/MANIFEST.tsv
# hrbench:key-end
