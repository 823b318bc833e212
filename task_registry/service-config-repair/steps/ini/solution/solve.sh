#!/bin/bash
cd /app
# hrbench:key-begin
cat > etc/db.ini <<'INI'
# database settings for inventory-api
[database]
host = db.internal
port = 5432
name = inventory

[pool]
size = 10
timeout = 30
INI
# hrbench:key-end
