#!/bin/bash
source /tests/checks.sh
CLI=/app/libcli.py
cp /app/library.db /tmp/t.db 2>/dev/null
# expected report computed from the pristine source data shipped with the tests (open loans after the whole log)
EXP="$(python3 - <<'PY'
import csv, datetime
title = {r["isbn"]: r["title"] for r in csv.DictReader(open("/tests/pristine/data/books.csv"))}
open_loans = []
for line in open("/tests/pristine/data/loans.log"):
    if not line.strip():
        continue
    day, kind, isbn, member = line.split()
    if kind == "LOAN":
        open_loans.append([member, isbn, day])
    else:
        for o in open_loans:
            if o[0] == member and o[1] == isbn:
                open_loans.remove(o)
                break
last = max(datetime.date.fromisoformat(o[2]) for o in open_loans)
def report(asof, n):
    rows = [(m, i, title[i], (asof - datetime.date.fromisoformat(d)).days) for m, i, d in open_loans]
    rows = sorted((r for r in rows if r[3] > n), key=lambda r: (-r[3], r[0]))
    return ";".join(f"{m}|{i}|{d}" for m, i, t, d in rows)
a1 = last + datetime.timedelta(days=10)
print("asof1:", a1)
print("exp1:", report(a1, 14))
print("asof2:", a1)
print("exp2:", report(a1, 25))
PY
)"
ASOF="$(printf '%s\n' "$EXP" | field - asof1)"
R1="$(untrusted python3 "$CLI" --db /tmp/t.db overdue --as-of "$ASOF" 2>&1)"
R2="$(untrusted python3 "$CLI" --db /tmp/t.db overdue --as-of "$ASOF" --days 25 2>&1)"
expect_eq header "$(printf '%s\n' "$R1" | head -n 1)" "member,isbn,title,days_out"
tbl() { printf '%s\n' "$1" | awk -F, 'NR > 1 { printf "%s|%s|%s\n", $1, $2, $NF }'; }
expect_eq default_days "$(tbl "$R1")" "$(printf '%s\n' "$EXP" | field - exp1 | tr ';' '\n')" seq
expect_eq days_25 "$(tbl "$R2")" "$(printf '%s\n' "$EXP" | field - exp2 | tr ';' '\n')" seq
FIRST="$(printf '%s\n' "$R1" | awk -F, 'NR == 2 { print $2 }')"
expect_eq title_column "$(printf '%s\n' "$R1" | cell - isbn "$FIRST" title)" "$(cell /tests/pristine/data/books.csv isbn "$FIRST" title)"
expect_out still_available '^available:[0-9]+$' -- untrusted python3 "$CLI" --db /tmp/t.db available "$FIRST"
finish
