#!/bin/bash
source /tests/checks.sh
# the input and everything expected of it are fixed here, before agent code runs (it may rewrite /tmp)
IN='id,name,price,qty
1,apple,0.5,10
2,pear,1.25,-3
3,fig 7,2,0'
printf '%s\n' "$IN" > /tmp/in.csv
WANT_ROWS="$(printf '%s\n' "$IN" | rows - id)"
WANT_NAMES="$(printf '%s\n' "$IN" | column - name)"
OUT="$(untrusted python3 /app/tools/csv2json.py /tmp/in.csv 2>&1)"
expect_ok types -- python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert isinstance(d, list) and len(d) == 3, d
assert all(type(o["id"]) is int and type(o["qty"]) is int for o in d), d
assert [type(o["price"]) for o in d] == [float, float, int], d
assert all(type(o["name"]) is str for o in d), d
' "$OUT"
T="$(printf '%s' "$OUT" | table - 2>/dev/null)"
expect_eq row_count "$(printf '%s\n' "$T" | rows - id)" "$WANT_ROWS" int
expect_eq names "$(printf '%s\n' "$T" | column - name)" "$WANT_NAMES" seq
expect_eq price_2 "$(printf '%s\n' "$T" | cell - id 2 price)" 1.25 num
expect_eq qty_2 "$(printf '%s\n' "$T" | cell - id 2 qty)" -3 int
finish
