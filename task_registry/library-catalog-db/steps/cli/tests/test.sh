#!/bin/bash
source /tests/checks.sh
CLI=/app/libcli.py
# expected values come from the pristine source data shipped with the tests
B=/tests/pristine/data/books.csv
cp /app/library.db /tmp/t.db 2>/dev/null
LOG=/tests/pristine/data/loans.log
# expected availability per ISBN from the source data
AVAIL="$(awk -F, 'FNR == NR { if (FNR > 1) c[$1] = $5; next }
  $2 == "LOAN" { c[$3]-- } $2 == "RETURN" { c[$3]++ } END { for (k in c) print k "," c[k] }' FS=, "$B" FS=' ' "$LOG" | LC_ALL=C sort)"
FREE="$(printf '%s\n' "$AVAIL" | awk -F, '$2 > 0 { print $1; exit }')"
FULL="$(printf '%s\n' "$AVAIL" | awk -F, '$2 == 0 { print $1; exit }')"
expect_file cli "$CLI"
expect_out available_free "^available:$(printf '%s\n' "$AVAIL" | awk -F, -v k="$FREE" '$1 == k { print $2 }')\$" -- untrusted python3 "$CLI" --db /tmp/t.db available "$FREE"
expect_out available_full '^available:0$' -- untrusted python3 "$CLI" --db /tmp/t.db available "$FULL"
expect_fail unknown_isbn 'unknown isbn' -- untrusted python3 "$CLI" --db /tmp/t.db available 000-0-00-000000-0
# search: books by the most frequent author surname, case-insensitive, sorted by isbn
AUTH="$(column "$B" author | awk '{ print $NF }' | sort | uniq -c | sort -k1,1nr -k2 | awk 'NR == 1 { print $2 }')"
EXP_SEARCH="$(awk -F, -v t="$(printf '%s' "$AUTH" | tr 'A-Z' 'a-z')" 'NR > 1 && (index(tolower($2), t) || index(tolower($3), t)) { print $1 }' "$B" | LC_ALL=C sort)"
OUT="$(untrusted python3 "$CLI" --db /tmp/t.db search "$(printf '%s' "$AUTH" | tr 'a-z' 'A-Z')" 2>&1)"
expect_eq search_isbns "$(printf '%s\n' "$OUT" | cut -f1)" "$EXP_SEARCH" seq
expect_eq search_titles "$(printf '%s\n' "$OUT" | cut -f2)" "$(for i in $EXP_SEARCH; do cell "$B" isbn "$i" title; done)" seq
# loan: succeeds on a free copy, then refuses on a fully loaned book without changing the db
expect_out loan_ok '^loaned$' -- untrusted python3 "$CLI" --db /tmp/t.db loan "$FREE" m999 --date 2024-05-01
expect_fail loan_full 'no copies available' -- untrusted python3 "$CLI" --db /tmp/t.db loan "$FULL" m999 --date 2024-05-01
expect_eq loan_rows "$(python3 -c 'import sqlite3; c = sqlite3.connect("/tmp/t.db"); print(c.execute("SELECT count(*) FROM loans WHERE member = ?", ("m999",)).fetchone()[0], c.execute("SELECT count(*) FROM loans WHERE member = ? AND isbn = ? AND loaned_on = ? AND returned_on IS NULL", ("m999", "'"$FREE"'", "2024-05-01")).fetchone()[0])' 2>&1)" "1 1" text
finish
