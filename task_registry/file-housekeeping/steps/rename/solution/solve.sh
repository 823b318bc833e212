#!/bin/bash
cd /app/photos
for f in IMG_*; do
    [[ "$f" =~ ^IMG_([0-9]{4})([0-9]{2})([0-9]{2})_([0-9]{6})\.([Jj][Pp][Ee]?[Gg])$ ]] || continue
# hrbench:key-begin
    mv -- "$f" "${BASH_REMATCH[1]}-${BASH_REMATCH[2]}-${BASH_REMATCH[3]}_${BASH_REMATCH[4]}.jpg"
# hrbench:key-end
done
