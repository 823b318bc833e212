#!/bin/bash
source /tests/checks.sh
n=0
for f in /app/scripts/*.sh; do n=$((n + 1)); expect_ok "exec_$(basename "$f" .sh)" -- test -x "$f"; done
[ "$n" -gt 0 ] || fail scripts_found "no *.sh files in /app/scripts"
expect_fail readme_not_exec '' -- test -x /app/scripts/README.md
for f in /app/conf/*.conf; do expect_eq "mode_$(basename "$f" .conf)" "$(stat -c %a "$f")" 600 exact; done
expect_eq motd_kept "$(cat /app/conf/motd.txt 2>/dev/null)" public exact
expect_ok deploy_runs -- /app/scripts/deploy.sh
finish
