#!/bin/bash
source /tests/checks.sh
expect_file schema_sql /app/schema.sql
expect_file database /app/library.db
P="$(python3 /tests/probe.py 2>&1)"
expect_eq books_columns "$(printf '%s\n' "$P" | field - books_columns)" "isbn,title,author,year,copies" set
expect_eq loans_columns "$(printf '%s\n' "$P" | field - loans_columns)" "id,isbn,member,loaned_on,returned_on" set
expect_eq books_pk "$(printf '%s\n' "$P" | field - books_pk)" "isbn"
expect_eq loans_pk "$(printf '%s\n' "$P" | field - loans_pk)" "id"
expect_eq books_notnull "$(printf '%s\n' "$P" | field - books_notnull | tr ',' '\n' | grep -v '^isbn$')" "title,author,copies" set
expect_eq loans_notnull "$(printf '%s\n' "$P" | field - loans_notnull | tr ',' '\n' | grep -v '^id$')" "isbn,member,loaned_on" set
expect_eq loans_fk "$(printf '%s\n' "$P" | field - loans_fk)" "isbn->books.isbn"
expect_eq index "$(printf '%s\n' "$P" | field - index_cols)" "isbn"
expect_eq autoincrement "$(printf '%s\n' "$P" | field - autoincrement)" yes bool
expect_eq negative_copies "$(printf '%s\n' "$P" | field - negative_copies)" rejected
expect_eq duplicate_isbn "$(printf '%s\n' "$P" | field - duplicate_isbn)" rejected
expect_eq empty_books "$(printf '%s\n' "$P" | field - book_rows)" 0 int
finish
