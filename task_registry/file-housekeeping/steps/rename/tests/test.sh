#!/bin/bash
source /tests/checks.sh
D=/app/photos
# the original photos are shipped with the tests: each camera file must be there under its new
# name with its original content
P=/tests/pristine/photos
expect_eq no_img_left "$(ls "$D" | grep -ci '^img_')" 0 int
n=0
for f in "$P"/IMG_*; do
    b="$(basename "$f")"
    want="$(printf '%s' "$b" | sed -E 's/^IMG_([0-9]{4})([0-9]{2})([0-9]{2})_([0-9]{6})\..*/\1-\2-\3_\4.jpg/')"
    n=$((n + 1))
    expect_ok "renamed_$n" -- cmp -- "$f" "$D/$want"
done
expect_eq renamed_count "$(ls "$D" | grep -c '\.jpg$')" "$n" int
expect_eq others_kept "$(ls "$D" | grep -v '\.jpg$')" "$(ls "$P" | grep -v '^IMG_')" set
expect_eq any_renamed "$( [ "$n" -gt 0 ] && echo yes || echo no)" yes bool
finish
