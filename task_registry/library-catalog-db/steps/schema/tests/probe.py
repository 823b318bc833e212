# Prints `name: value` facts about /app/library.db for the checks (works on a copy).
import shutil, sqlite3, sys
shutil.copy("/app/library.db", "/tmp/probe.db")
c = sqlite3.connect("/tmp/probe.db")
def cols(t):
    return [r[1] for r in c.execute(f"PRAGMA table_info({t})")]
print("books_columns:", ",".join(cols("books")))
print("loans_columns:", ",".join(cols("loans")))
pk = [r[1] for r in c.execute("PRAGMA table_info(books)") if r[5]]
print("books_pk:", ",".join(pk))
print("loans_pk:", ",".join(r[1] for r in c.execute("PRAGMA table_info(loans)") if r[5]))
notnull = [r[1] for r in c.execute("PRAGMA table_info(books)") if r[3]]
print("books_notnull:", ",".join(notnull))
print("loans_notnull:", ",".join(r[1] for r in c.execute("PRAGMA table_info(loans)") if r[3]))
print("loans_fk:", ",".join(f"{r[3]}->{r[2]}.{r[4]}" for r in c.execute("PRAGMA foreign_key_list(loans)")))
print("index_cols:", ",".join(r[2] for r in c.execute("PRAGMA index_info(idx_loans_isbn)")))
sql = (c.execute("SELECT sql FROM sqlite_master WHERE name='loans'").fetchone() or [""])[0] or ""
print("autoincrement:", "yes" if "autoincrement" in sql.lower() else "no")
print("book_rows:", c.execute("SELECT count(*) FROM books").fetchone()[0])
print("loan_rows:", c.execute("SELECT count(*) FROM loans").fetchone()[0])
try:
    c.execute("INSERT INTO books VALUES ('x-1', 'T', 'A', 2000, -1)")
    print("negative_copies: accepted")
except sqlite3.IntegrityError:
    print("negative_copies: rejected")
try:
    c.execute("INSERT INTO books VALUES ('x-2', 'T', 'A', 2000, 1)")
    c.execute("INSERT INTO books VALUES ('x-2', 'U', 'B', 2001, 1)")
    print("duplicate_isbn: accepted")
except sqlite3.IntegrityError:
    print("duplicate_isbn: rejected")
