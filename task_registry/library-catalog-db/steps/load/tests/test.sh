#!/bin/bash
source /tests/checks.sh
DB=/app/library.db
expect_file database "$DB"
P="$(python3 - "$DB" <<'PY' 2>&1
import shutil, sqlite3, sys
shutil.copy(sys.argv[1], "/tmp/t.db")
c = sqlite3.connect("/tmp/t.db")
q = lambda s: c.execute(s).fetchone()[0]
print("books:", q("SELECT count(*) FROM books"))
print("copies:", q("SELECT sum(copies) FROM books"))
print("loans:", q("SELECT count(*) FROM loans"))
print("open:", q("SELECT count(*) FROM loans WHERE returned_on IS NULL"))
print("open_pairs:", ",".join(f"{i}/{m}" for i, m in c.execute("SELECT isbn, member FROM loans WHERE returned_on IS NULL")))
print("returns:", ",".join(f"{r}/{i}/{m}" for r, i, m in c.execute("SELECT returned_on, isbn, member FROM loans WHERE returned_on IS NOT NULL")))
print("titles:", ",".join(t for (t,) in c.execute("SELECT title FROM books")))
PY
)"
# expected values come from the pristine source data shipped with the tests
LOG=/tests/pristine/data/loans.log
OPEN="$(awk '$2 == "LOAN" { o[$3 "/" $4]++ } $2 == "RETURN" { o[$3 "/" $4]-- } END { for (k in o) for (i = 0; i < o[k]; i++) print k }' "$LOG")"
expect_eq book_rows "$(printf '%s\n' "$P" | field - books)" "$(rows /tests/pristine/data/books.csv isbn)" int
expect_eq total_copies "$(printf '%s\n' "$P" | field - copies)" "$(awk -F, 'NR > 1 { s += $5 } END { print s }' /tests/pristine/data/books.csv)" int
expect_eq titles "$(printf '%s\n' "$P" | field - titles)" "$(column /tests/pristine/data/books.csv title)" set
expect_eq loan_rows "$(printf '%s\n' "$P" | field - loans)" "$(grep -c ' LOAN ' "$LOG")" int
expect_eq open_loans "$(printf '%s\n' "$P" | field - open)" "$(printf '%s\n' "$OPEN" | grep -c .)" int
expect_eq open_pairs "$(printf '%s\n' "$P" | field - open_pairs)" "$OPEN" set
expect_eq returns "$(printf '%s\n' "$P" | field - returns)" "$(awk '$2 == "RETURN" { print $1 "/" $3 "/" $4 }' "$LOG")" set
finish
