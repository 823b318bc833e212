#!/bin/bash
cd /app
mkdir -p build
echo "student_id,name,math,physics,chemistry" > build/scores.csv
# hrbench:key-begin
awk -F';' 'function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
FNR == 1 { n = split(FILENAME, pp, "/"); subj = pp[n]; sub(/\.csv$/, "", subj); next }
{ id = trim($1); if (!(id in nm)) nm[id] = trim($2); sc[id, subj] = trim($3) + 0 }
END { for (id in nm) printf "%s,%s,%d,%d,%d\n", id, nm[id], sc[id, "math"], sc[id, "physics"], sc[id, "chemistry"] }' \
  raw/math.csv raw/physics.csv raw/chemistry.csv | sort -t, -k1,1 >> build/scores.csv
# hrbench:key-end
