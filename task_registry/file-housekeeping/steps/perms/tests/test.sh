#!/bin/bash
source /tests/checks.sh
# the scripts and config files of the task's initial state (not whatever the workspace holds now)
for s in backup cleanup deploy; do expect_ok "exec_$s" -- test -f "/app/scripts/$s.sh" -a -x "/app/scripts/$s.sh"; done
expect_eq scripts_kept "$(cd /app/scripts 2>/dev/null && ls -- *.sh)" "backup.sh,cleanup.sh,deploy.sh" set
expect_fail readme_not_exec '' -- test -x /app/scripts/README.md
expect_file readme_kept /app/scripts/README.md
for c in api db; do expect_eq "mode_$c" "$(stat -c %a "/app/conf/$c.conf" 2>/dev/null)" 600 exact; done
expect_eq motd_kept "$(cat /app/conf/motd.txt 2>/dev/null)" public exact
expect_ok deploy_runs -- untrusted /app/scripts/deploy.sh
finish
