#!/bin/bash
# Run as root inside the container. Modes:
#   all          SIGKILL every process but PID 1, the main process, this script and its parent
#                (_VERIFY runs it as a child), until none is left; then empty /tmp
#   tree SHELL   the descendants of a DockerShell's bash only (its interrupt); `end SHELL`: them and it
# SHELL is the shell's nonce, found on its bash's command line with PPid 0 (only an exec has that
# in the container, so the agent cannot fake one). Victims are stopped before they are killed, so
# nothing forks away meanwhile. Pure bash over /proc (no forks in the loop): any image with bash.
mode=$1 shell=hrbench-shell-${2:-}
declare -A keep=([1]=1 [$$]=1 [$PPID]=1) roots=() parent=()
scan() {  # parent[] of every live process; PID 1's oldest child (the container's main process) is kept
  parent=(); roots=()
  local d p line f argv oldest= first=
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    { read -r line < "$d/stat"; } 2>/dev/null || continue
    read -r -a f <<< "${line##*) }"  # f[0] state, f[1] ppid, f[19] start time
    [ "${f[0]}" = Z ] || [ "${f[1]}" = $$ ] && continue
    parent[$p]=${f[1]}
    if [ "${f[1]}" = 0 ] && [ "$mode" != all ]; then
      { mapfile -d '' -t argv < "$d/cmdline"; } 2>/dev/null
      [ "${argv[-1]:-}" = "$shell" ] && roots[$p]=1
    fi
    if [ "${f[1]}" = 1 ] && { [ -z "$first" ] || [ "${f[19]}" -lt "$first" ]; }; then first=${f[19]}; oldest=$p; fi
  done
  [ -n "$oldest" ] && keep[$oldest]=1
}
for round in $(seq 100); do
  scan; victims=()
  for p in "${!parent[@]}"; do
    [ -n "${keep[$p]:-}" ] && continue
    [ "$mode" = end ] && [ -n "${roots[$p]:-}" ] && { victims+=("$p"); continue; }
    if [ "$mode" != all ]; then
      q=${parent[$p]}; hit=
      while [ -n "$q" ] && [ "$q" != 0 ] && [ "$q" != 1 ]; do
        [ -n "${roots[$q]:-}" ] && { hit=1; break; }
        q=${parent[$q]:-}
      done
      [ -n "$hit" ] || continue
    fi
    victims+=("$p")
  done
  if [ ${#victims[@]} -eq 0 ]; then
    [ "$mode" = all ] && find /tmp -mindepth 1 -delete 2>/dev/null
    exit 0
  fi
  kill -STOP "${victims[@]}" 2>/dev/null; kill -KILL "${victims[@]}" 2>/dev/null
done
echo "hrbench: processes survived 100 kill rounds" >&2; exit 1
