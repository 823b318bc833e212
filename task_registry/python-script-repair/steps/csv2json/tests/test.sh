#!/bin/bash
source /tests/checks.sh
printf 'id,name,price,qty\n1,apple,0.5,10\n2,pear,1.25,-3\n3,fig 7,2,0\n' > /tmp/in.csv
OUT="$(python3 /app/tools/csv2json.py /tmp/in.csv 2>&1)"
expect_ok types -- python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert isinstance(d, list) and len(d) == 3, d
assert all(type(o["id"]) is int and type(o["qty"]) is int for o in d), d
assert [type(o["price"]) for o in d] == [float, float, int], d
assert all(type(o["name"]) is str for o in d), d
' "$OUT"
T="$(printf '%s' "$OUT" | table - 2>/dev/null)"
expect_eq row_count "$(printf '%s\n' "$T" | rows - id)" "$(rows /tmp/in.csv id)" int
expect_eq names "$(printf '%s\n' "$T" | column - name)" "$(column /tmp/in.csv name)" seq
expect_eq price_2 "$(printf '%s\n' "$T" | cell - id 2 price)" 1.25 num
expect_eq qty_2 "$(printf '%s\n' "$T" | cell - id 2 qty)" -3 int
finish
