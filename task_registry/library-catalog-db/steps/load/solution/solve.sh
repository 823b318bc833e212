#!/bin/bash
cd /app
cat > load.py <<'PY'
import csv, sqlite3
c = sqlite3.connect("library.db")
c.execute("DELETE FROM loans")
c.execute("DELETE FROM books")
for r in csv.DictReader(open("data/books.csv")):
    c.execute("INSERT INTO books VALUES (?, ?, ?, ?, ?)",
              (r["isbn"], r["title"], r["author"], int(r["year"]), int(r["copies"])))
for line in open("data/loans.log"):
    if not line.strip():
        continue
    day, kind, isbn, member = line.split()
    if kind == "LOAN":
        c.execute("INSERT INTO loans (isbn, member, loaned_on) VALUES (?, ?, ?)", (isbn, member, day))
    else:
        c.execute("UPDATE loans SET returned_on = ? WHERE id = (SELECT min(id) FROM loans WHERE isbn = ? "
                  "AND member = ? AND returned_on IS NULL)", (day, isbn, member))
c.commit()
PY
# hrbench:key-begin
python3 load.py
# hrbench:key-end
