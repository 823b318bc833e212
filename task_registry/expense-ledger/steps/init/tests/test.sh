#!/bin/bash
source /tests/checks.sh
L=/app/ledger.py
expect_file ledger_cli "$L"
expect_file ledger_db /app/ledger.db
expect_eq table_columns "$(python3 -c 'import sqlite3; print(",".join(r[1] for r in sqlite3.connect("file:/app/ledger.db?mode=ro", uri=True).execute("PRAGMA table_info(expenses)")))' 2>&1)" "id,day,category,amount_cents,note" seq
D=/tmp/t.db
expect_ok init_twice -- untrusted "python3 $L --db $D init && python3 $L --db $D init"
expect_out add_1 '^added [0-9]+$' -- untrusted python3 "$L" --db "$D" add 2024-05-02 food 12.5 --note lunch
expect_out add_2 '^added [0-9]+$' -- untrusted python3 "$L" --db "$D" add 2024-05-03 food 7
expect_out add_3 '^added [0-9]+$' -- untrusted python3 "$L" --db "$D" add 2024-05-03 books 19.99
Q="$(python3 - <<'PY' 2>&1
import sqlite3
c = sqlite3.connect("/tmp/t.db")
print("rows:", ";".join(f"{d}|{k}|{a}" for d, k, a in c.execute("SELECT day, category, amount_cents FROM expenses ORDER BY id")))
print("note:", c.execute("SELECT note FROM expenses WHERE amount_cents = 1250").fetchone()[0])
PY
)"
expect_eq stored_cents "$(printf '%s\n' "$Q" | field - rows)" "2024-05-02|food|1250;2024-05-03|food|700;2024-05-03|books|1999" seq
expect_eq note "$(printf '%s\n' "$Q" | field - note)" lunch exact
expect_out total_all '^total:39\.49$' -- untrusted python3 "$L" --db "$D" total
expect_out total_food '^total:19\.50$' -- untrusted python3 "$L" --db "$D" total --category food
finish
