#!/bin/bash
source /tests/checks.sh
M=/app/backup/MANIFEST.tsv
# expected paths, sizes and digests come from the pristine project shipped with the tests
P=/tests/pristine/project
EXP="$(cd "$P" && find . -type f ! -name '*.tmp' ! -path './cache/*' -printf '%P\n' | LC_ALL=C sort)"
expect_file manifest "$M"
expect_eq header "$(head -n 1 "$M" 2>/dev/null | tr '\t' ' ')" "path size sha256" exact
expect_eq paths "$(tail -n +2 "$M" 2>/dev/null | cut -f1)" "$EXP" exact
ok=1; n=0
while IFS="$(printf '\t')" read -r p size sum; do
    n=$((n + 1))
    [ "$size" = "$(stat -c %s -- "$P/$p" 2>/dev/null)" ] || { ok=0; fail "size_$n" "wrong size for $p"; }
    [ "$sum" = "$(sha256sum -- "$P/$p" 2>/dev/null | cut -d' ' -f1)" ] || { ok=0; fail "sha_$n" "wrong sha256 for $p"; }
done < <(tail -n +2 "$M" 2>/dev/null)
[ "$ok" = 1 ] && [ "$n" -gt 0 ] && pass sizes_and_digests
finish
