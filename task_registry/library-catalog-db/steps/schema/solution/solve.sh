#!/bin/bash
cd /app
cat > schema.sql <<'SQL'
CREATE TABLE books (
    isbn    TEXT PRIMARY KEY,
    title   TEXT NOT NULL,
    author  TEXT NOT NULL,
    year    INTEGER,
    copies  INTEGER NOT NULL CHECK (copies >= 0)
);
CREATE TABLE loans (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    isbn        TEXT NOT NULL REFERENCES books(isbn),
    member      TEXT NOT NULL,
    loaned_on   TEXT NOT NULL,
    returned_on TEXT
);
CREATE INDEX idx_loans_isbn ON loans(isbn);
SQL
rm -f library.db
# hrbench:key-begin
python3 -c 'import sqlite3; c = sqlite3.connect("library.db"); c.executescript(open("schema.sql").read()); c.commit()'
# hrbench:key-end
