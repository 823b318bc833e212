# Reference: reads weights.ini then the pristine raw/{math,physics,chemistry}.csv
# prints id,name,math,physics,chemistry,weighted,letter sorted by id
function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
FILENAME ~ /weights\.ini$/ {
    if ($0 ~ /^\[/) { sec = $0; next }
    if (sec == "[weights]" && index($0, "=")) { split($0, kv, "="); w[trim(kv[1])] = trim(kv[2]) + 0 }
    next
}
FNR == 1 { n = split(FILENAME, pp, "/"); subj = pp[n]; sub(/\.csv$/, "", subj); next }
{
    split($0, f, ";"); id = trim(f[1]); if (id == "") next
    if (!(id in nm)) nm[id] = trim(f[2])
    sc[id, subj] = trim(f[3]) + 0
}
END {
    for (id in nm) {
        m = sc[id, "math"] + 0; p = sc[id, "physics"] + 0; c = sc[id, "chemistry"] + 0
        x = m * w["math"] + p * w["physics"] + c * w["chemistry"]
        l = x >= 85 ? "A" : x >= 70 ? "B" : x >= 55 ? "C" : "F"
        printf "%s,%s,%d,%d,%d,%.1f,%s\n", id, nm[id], m, p, c, x, l
    }
}
