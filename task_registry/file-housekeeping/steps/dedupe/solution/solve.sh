#!/bin/bash
cd /app/downloads
# hrbench:key-begin
for f in *; do printf '%s\t%s\n' "$(sha256sum -- "$f" | cut -d' ' -f1)" "$f"; done \
  | LC_ALL=C sort -t "$(printf '\t')" -k1,1 -k2,2 \
  | awk -F'\t' 'seen[$1]++ { print $2 }' \
  | while IFS= read -r f; do rm -f -- "$f"; done
# hrbench:key-end
