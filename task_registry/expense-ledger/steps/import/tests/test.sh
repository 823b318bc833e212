#!/bin/bash
source /tests/checks.sh
L=/app/ledger.py
EXP="$(python3 /tests/expected.py /app/inbox/bank_export.csv)"
dump() { python3 -c 'import sqlite3, sys; [print(f"{d}|{c}|{a}|{n}") for d, c, a, n in sqlite3.connect(sys.argv[1]).execute("SELECT day, category, amount_cents, note FROM expenses ORDER BY id")]' "$1" 2>&1; }
# the real ledger holds the export exactly once
expect_eq ledger_rows "$(dump /app/ledger.db)" "$EXP" seq
# the command works on another file and rules set
cat > /tmp/bank.csv <<'CSV'
Date;Description;Amount
03.01.2025;Corner Shop;-4,05
04.01.2025;Salary;1000,00
05.01.2025;CORNER shop 2;-10,10
06.01.2025;Taxi Co;-23,00
CSV
printf '{"default": "misc", "rules": [{"match": "corner", "category": "snacks"}, {"match": "shop", "category": "never"}]}' > /tmp/rules.json
expect_ok init_tmp -- python3 "$L" --db /tmp/t.db init
expect_out import_count '^imported:3$' -- python3 "$L" --db /tmp/t.db import /tmp/bank.csv --rules /tmp/rules.json
expect_eq import_rows "$(dump /tmp/t.db)" "$(python3 /tests/expected.py /tmp/bank.csv /tmp/rules.json)" seq
expect_out total_after_import '^total:37\.15$' -- python3 "$L" --db /tmp/t.db total
finish
