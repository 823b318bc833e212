#!/bin/bash
source /tests/checks.sh
D=/app/photos
# every renamed file carries its original name in its content ("fake image IMG_...")
expect_eq no_img_left "$(ls "$D" | grep -ci '^img_')" 0 int
n=0
for f in "$D"/*.jpg; do
    [ -e "$f" ] || continue
    b="$(basename "$f")"
    orig="$(sed -n 's/^fake image //p' "$f")"
    want="$(printf '%s' "$orig" | sed -E 's/^IMG_([0-9]{4})([0-9]{2})([0-9]{2})_([0-9]{6})\..*/\1-\2-\3_\4.jpg/')"
    n=$((n + 1))
    expect_eq "name_$n" "$b" "$want" exact
done
expect_eq renamed_count "$n" "$(grep -l '^fake image IMG_' "$D"/* 2>/dev/null | wc -l)" int
expect_eq others_kept "$(ls "$D" | grep -v '\.jpg$')" "notes.txt
Screenshot 2024-01-01.png" set
expect_eq any_renamed "$( [ "$n" -gt 0 ] && echo yes || echo no)" yes bool
finish
