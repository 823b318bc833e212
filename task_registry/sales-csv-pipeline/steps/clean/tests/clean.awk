# Reference cleaning of data/sales_raw.csv (rules stated in the clean instruction).
# Output: order_id,date,region,product_code,qty,unit_price rows, unsorted.
BEGIN { FS = "," }
NR == 1 { next }
{
    for (i = 1; i <= NF; i++) { gsub(/^[ \t]+/, "", $i); gsub(/[ \t]+$/, "", $i) }
    if ($5 !~ /^[0-9]+$/ || $5 + 0 <= 0) next
    if (seen[$1]++) next
    p = $6; gsub(/\$/, "", p)
    printf "%s,%s,%s,%s,%d,%.2f\n", $1, $2, tolower($3), $4, $5, p
}
