#!/bin/bash
cd /app
# hrbench:key-begin
chmod u+x scripts/*.sh
chmod 600 conf/*.conf
# hrbench:key-end
