#!/bin/bash
source /tests/checks.sh
S=/app/tools/slugify.py
for t in 'Hello, World!' '  Rock & Roll -- 2024  ' 'Ünïcode Straße 9' 'already-a-slug' '__Tabs	and  Spaces__'; do
    want="$(printf '%s' "$t" | tr 'A-Z' 'a-z' | LC_ALL=C sed -E 's/[^a-z0-9]+/-/g; s/^-+//; s/-+$//')"
    expect_eq "slug_$(printf '%s' "$want" | cut -c1-12)" "$(untrusted python3 "$S" "$t" 2>&1)" "$want" exact
done
finish
