#!/bin/bash
cd /app
cat > libcli.py <<'PY'
import argparse, sqlite3, sys


def available(c, isbn):
    row = c.execute("SELECT copies FROM books WHERE isbn = ?", (isbn,)).fetchone()
    if row is None:
        return None
    out = c.execute("SELECT count(*) FROM loans WHERE isbn = ? AND returned_on IS NULL", (isbn,)).fetchone()[0]
    return row[0] - out


def cmd_available(c, a):
    n = available(c, a.isbn)
    if n is None:
        print(f"unknown isbn {a.isbn}", file=sys.stderr)
        return 1
    print(f"available: {n}")
    return 0


def cmd_search(c, a):
    like = f"%{a.term.lower()}%"
    for isbn, title in c.execute("SELECT isbn, title FROM books WHERE lower(title) LIKE ? OR lower(author) LIKE ? "
                                 "ORDER BY isbn", (like, like)):
        print(f"{isbn}\t{title}")
    return 0


def cmd_loan(c, a):
    n = available(c, a.isbn)
    if n is None:
        print(f"unknown isbn {a.isbn}", file=sys.stderr)
        return 1
    if n <= 0:
        print(f"no copies available for {a.isbn}", file=sys.stderr)
        return 1
    c.execute("INSERT INTO loans (isbn, member, loaned_on) VALUES (?, ?, ?)", (a.isbn, a.member, a.date))
    c.commit()
    print("loaned")
    return 0


def main():
    p = argparse.ArgumentParser(prog="libcli")
    p.add_argument("--db", default="/app/library.db")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("available"); s.add_argument("isbn"); s.set_defaults(fn=cmd_available)
    s = sub.add_parser("search"); s.add_argument("term"); s.set_defaults(fn=cmd_search)
# hrbench:key-begin
    s = sub.add_parser("loan"); s.add_argument("isbn"); s.add_argument("member"); s.add_argument("--date", required=True)
    s.set_defaults(fn=cmd_loan)
# hrbench:key-end
    a = p.parse_args()
    return a.fn(sqlite3.connect(a.db), a)


if __name__ == "__main__":
    sys.exit(main())
PY
