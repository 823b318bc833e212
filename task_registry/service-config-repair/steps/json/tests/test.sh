#!/bin/bash
source /tests/checks.sh
F=/app/etc/app.json
# one parse: validity, the type of port, and the values as `key: value` lines
P="$(python3 - "$F" <<'PY' 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
print("valid: yes")
print("port_type:", type(d.get("port")).__name__)
print("port:", d.get("port"))
print("debug:", json.dumps(d.get("debug")))
print("name:", d.get("name"))
print("allowed_hosts:", ",".join(d.get("allowed_hosts", [])))
print("log_level:", d.get("log", {}).get("level"))
print("log_file:", d.get("log", {}).get("file"))
PY
)"
expect_eq valid_json "$(printf '%s\n' "$P" | field - valid)" yes bool
expect_eq port_is_int "$(printf '%s\n' "$P" | field - port_type)" int exact
expect_eq port "$(printf '%s\n' "$P" | field - port)" 8080 exact
expect_eq debug "$(printf '%s\n' "$P" | field - debug)" false exact
expect_eq name "$(printf '%s\n' "$P" | field - name)" "inventory-api" exact
expect_eq allowed_hosts "$(printf '%s\n' "$P" | field - allowed_hosts)" "localhost,127.0.0.1" set
expect_eq log_level "$(printf '%s\n' "$P" | field - log_level)" info exact
expect_eq log_file "$(printf '%s\n' "$P" | field - log_file)" /app/var/app.log exact
finish
