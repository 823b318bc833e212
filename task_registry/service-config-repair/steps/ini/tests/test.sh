#!/bin/bash
source /tests/checks.sh
F=/app/etc/db.ini
P="$(python3 -c '
import configparser, sys
c = configparser.ConfigParser()
c.read(sys.argv[1])
for s in c.sections():
    for k, v in c[s].items():
        print(f"{s}.{k}: {v}")
print("sections:", ",".join(c.sections()))
' "$F" 2>&1)"
expect_eq parses "$(printf '%s\n' "$P" | grep -c Error)" 0 int
expect_eq sections "$(printf '%s\n' "$P" | field - sections)" "database,pool" set
expect_eq db_host "$(printf '%s\n' "$P" | field - database.host)" db.internal exact
expect_eq db_port "$(printf '%s\n' "$P" | field - database.port)" 5432 exact
expect_eq db_name "$(printf '%s\n' "$P" | field - database.name)" inventory exact
expect_eq pool_size "$(printf '%s\n' "$P" | field - pool.size)" 10 exact
expect_eq pool_timeout "$(printf '%s\n' "$P" | field - pool.timeout)" 30 exact
finish
