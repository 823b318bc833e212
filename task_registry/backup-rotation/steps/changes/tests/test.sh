#!/bin/bash
source /tests/checks.sh
M=/app/backup/MANIFEST.tsv
# the update must be applied: every non-excluded member of the update equals the project file
expect_ok update_applied -- bash -c 'mkdir -p /tmp/u && tar -xzf /app/incoming/update.tar.gz -C /tmp/u && cd /tmp/u/project && for f in $(find . -type f ! -name "*.tmp" -printf "%P\n"); do cmp -s "$f" "/app/project/$f" || { echo "not applied: $f"; exit 1; }; done'
EXP="$(cd /app/project && find . -type f ! -name '*.tmp' ! -path './cache/*' -printf '%P\n' | LC_ALL=C sort | while IFS= read -r f; do
    old="$(awk -F'\t' -v p="$f" 'NR > 1 && $1 == p { print $3 }' "$M")"
    new="$(sha256sum -- "$f" | cut -d' ' -f1)"
    if [ -z "$old" ]; then echo "A $f"; elif [ "$old" != "$new" ]; then echo "M $f"; fi
done)"
expect_file changes_file /app/backup/changes.txt
expect_eq changes "$(cat /app/backup/changes.txt 2>/dev/null)" "$EXP" exact
expect_file manifest_kept "$M"
finish
