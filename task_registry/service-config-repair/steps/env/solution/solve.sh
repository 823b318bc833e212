#!/bin/bash
cd /app
# hrbench:key-begin
cat > etc/worker.env <<'ENV'
# worker settings, sourced by the worker launcher
WORKER_NAME=inventory-worker
CONCURRENCY=4
QUEUES=default,mail
LOG_LEVEL=info
RETRY_DELAY=5
ENV
# hrbench:key-end
