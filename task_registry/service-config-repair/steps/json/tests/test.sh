#!/bin/bash
source /tests/checks.sh
F=/app/etc/app.json
expect_ok valid_json -- python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$F"
expect_ok port_is_int -- python3 -c 'import json, sys; v = json.load(open(sys.argv[1]))["port"]; sys.exit(0 if type(v) is int and v == 8080 else 1)' "$F"
expect_eq debug "$(field "$F" debug)" false bool
expect_eq name "$(field "$F" name)" "inventory-api"
expect_eq allowed_hosts "$(field "$F" allowed_hosts)" "localhost,127.0.0.1" set
expect_eq log_level "$(field "$F" log.level)" info
expect_eq log_file "$(field "$F" log.file)" /app/var/app.log exact
finish
