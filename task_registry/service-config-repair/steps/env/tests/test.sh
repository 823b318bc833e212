#!/bin/bash
source /tests/checks.sh
F=/app/etc/worker.env
# worker.env is agent-edited code: it is only ever sourced inside the nested sandbox
expect_no_out sources_cleanly '.' -- untrusted env -i bash -c "set -a; . $F"
show() { untrusted env -i bash -c "set -a; . $F >/dev/null 2>&1; printf '%s' \"\$$1\""; }
expect_eq concurrency "$(show CONCURRENCY)" 4 exact
expect_eq queues "$(show QUEUES)" default,mail exact
expect_eq retry_delay "$(show RETRY_DELAY)" 5 exact
expect_eq worker_name "$(show WORKER_NAME)" inventory-worker exact
expect_eq log_level "$(show LOG_LEVEL)" info exact
expect_eq no_duplicates "$(grep -E '^[[:space:]]*(export[[:space:]]+)?[A-Za-z_][A-Za-z0-9_]*[[:space:]]*=' "$F" | sed -E 's/^[[:space:]]*(export[[:space:]]+)?//; s/[[:space:]]*=.*//' | sort | uniq -d | wc -l)" 0 int
finish
