#!/bin/bash
source /tests/checks.sh
L=/app/ledger.py
# expected values come from the pristine inputs shipped with the tests, computed before agent code runs
EXP="$(python3 /tests/expected.py)"
EXP_TMP="$(python3 /tests/expected.py /tests/bank.csv /tests/rules.json)"
dump() { python3 -c 'import sqlite3, sys; [print(f"{d}|{c}|{a}|{n}") for d, c, a, n in sqlite3.connect(sys.argv[1]).execute("SELECT day, category, amount_cents, note FROM expenses ORDER BY id")]' "$1" 2>&1; }
# the real ledger holds the export exactly once
expect_eq ledger_rows "$(dump /app/ledger.db)" "$EXP" seq
# the command works on another file and rules set (copies in /tmp: agent code may change those)
cp /tests/bank.csv /tests/rules.json /tmp/
expect_ok init_tmp -- untrusted python3 "$L" --db /tmp/t.db init
expect_out import_count '^imported:3$' -- untrusted python3 "$L" --db /tmp/t.db import /tmp/bank.csv --rules /tmp/rules.json
expect_eq import_rows "$(dump /tmp/t.db)" "$EXP_TMP" seq
expect_out total_after_import '^total:37\.15$' -- untrusted python3 "$L" --db /tmp/t.db total
finish
