#!/bin/bash
source /tests/checks.sh
M=/app/backup/MANIFEST.tsv
# pristine inputs shipped with the tests: the project before the update, and the update itself
P=/tests/pristine/project
U="$(mktemp -d)" && tar -xzf /tests/pristine/incoming/update.tar.gz -C "$U" 2>/dev/null
# the update must be applied: every non-excluded member of the update equals the project file
expect_ok update_applied -- bash -c 'cd "$1/project" && for f in $(find . -type f ! -name "*.tmp" -printf "%P\n"); do cmp -s "$f" "/app/project/$f" || { echo "not applied: $f"; exit 1; }; done' _ "$U"
# expected changes: the updated project (pristine project overlaid by the update) against the old digests
EXP="$({ cd "$P" && find . -type f ! -name '*.tmp' ! -path './cache/*' -printf '%P\n'; cd "$U/project" && find . -type f ! -name '*.tmp' ! -path './cache/*' -printf '%P\n'; } | LC_ALL=C sort -u | while IFS= read -r f; do
    old="$(sha256sum -- "$P/$f" 2>/dev/null | cut -d' ' -f1)"
    new="$old"; [ -f "$U/project/$f" ] && new="$(sha256sum -- "$U/project/$f" | cut -d' ' -f1)"
    if [ -z "$old" ]; then echo "A $f"; elif [ "$old" != "$new" ]; then echo "M $f"; fi
done)"
expect_file changes_file /app/backup/changes.txt
expect_eq changes "$(cat /app/backup/changes.txt 2>/dev/null)" "$EXP" exact
expect_file manifest_kept "$M"
finish
