#!/bin/bash
cd /app
cat > ledger.py <<'PY'
import argparse, csv, json, sqlite3, sys
from decimal import Decimal

SCHEMA = ("CREATE TABLE IF NOT EXISTS expenses (id INTEGER PRIMARY KEY, day TEXT NOT NULL, "
          "category TEXT NOT NULL, amount_cents INTEGER NOT NULL, note TEXT)")


def cents(text):
    return int((Decimal(text.replace(",", ".")) * 100).to_integral_value())


def cmd_init(c, a):
    c.execute(SCHEMA)
    c.commit()
    return 0


def cmd_add(c, a):
    cur = c.execute("INSERT INTO expenses (day, category, amount_cents, note) VALUES (?, ?, ?, ?)",
                    (a.day, a.category, cents(a.amount), a.note))
    c.commit()
    print(f"added {cur.lastrowid}")
    return 0


def cmd_total(c, a):
    if a.category:
        s = c.execute("SELECT sum(amount_cents) FROM expenses WHERE category = ?", (a.category,)).fetchone()[0]
    else:
        s = c.execute("SELECT sum(amount_cents) FROM expenses").fetchone()[0]
    s = s or 0
    print(f"total: {s // 100}.{s % 100:02d}")
    return 0


def cmd_import(c, a):
    rules = json.load(open(a.rules))
    n = 0
    with open(a.file, newline="") as f:
        for r in csv.DictReader(f, delimiter=";"):
            amount = cents(r["Amount"])
            if amount >= 0:
                continue
            d, m, y = r["Date"].strip().split(".")
            desc = r["Description"].strip()
            cat = next((x["category"] for x in rules["rules"] if x["match"].lower() in desc.lower()), rules["default"])
            c.execute("INSERT INTO expenses (day, category, amount_cents, note) VALUES (?, ?, ?, ?)",
                      (f"{y}-{m}-{d}", cat, -amount, desc))
            n += 1
    c.commit()
    print(f"imported: {n}")
    return 0


def money(c):
    return f"{c // 100}.{c % 100:02d}"


def cmd_summary(c, a):
    rows = c.execute("SELECT category, sum(amount_cents) FROM expenses WHERE substr(day, 1, 7) = ? "
                     "GROUP BY category", (a.month,)).fetchall()
# hrbench:key-begin
    rows.sort(key=lambda r: (-r[1], r[0]))
    for cat, s in rows:
        print(f"{cat}: {money(s)}")
# hrbench:key-end
    print(f"total: {money(sum(s for _, s in rows))}")
    return 0


def build_parser():
    p = argparse.ArgumentParser(prog="ledger")
    p.add_argument("--db", default="/app/ledger.db")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("init").set_defaults(fn=cmd_init)
    s = sub.add_parser("add")
    s.add_argument("day"); s.add_argument("category"); s.add_argument("amount"); s.add_argument("--note")
    s.set_defaults(fn=cmd_add)
    s = sub.add_parser("total"); s.add_argument("--category"); s.set_defaults(fn=cmd_total)
    s = sub.add_parser("import"); s.add_argument("file"); s.add_argument("--rules", default="/app/inbox/rules.json")
    s.set_defaults(fn=cmd_import)
    s = sub.add_parser("summary"); s.add_argument("--month", required=True); s.set_defaults(fn=cmd_summary)
    return p, sub


def main():
    p, sub = build_parser()
    a = p.parse_args()
    return a.fn(sqlite3.connect(a.db), a)


if __name__ == "__main__":
    sys.exit(main())
PY
