#!/bin/bash
# One verification in one exec, as root: kill every agent process, shells included (_REAPER), move
# the tests in from the root-only directory put_archive filled, run them as the agent user (as local
# does; /logs is theirs, so checks.sh keeps its private results in the log root that `untrusted`
# hides whole) under `timeout` in their own process group, kill whatever they left, remove /tests, keep
# /logs in the private directory, and print the reward files, each behind a nonce read from that
# directory: the verifier's output may quote agent files, but no agent could have learnt the
# nonce to forge a reward line. Exit 86: the agent could not be stopped.
echo "hrbench: verification started"  # before anything else: the harness knows the exec began
reaper=$1 priv=$2 limit=$3 user=$4; shift 4
for d in /.hrbench-verify-*; do [ "$d" = "$priv" ] || rm -rf "$d"; done
rm -rf /tests
bash -c "$reaper" hrbench all > "$priv/reaped" 2>&1 \
  || { echo "hrbench: could not stop the agent's processes: $(tail -c 400 "$priv/reaped")"; exit 86; }
# /logs starts as local's fresh one: nothing but the persisted /logs/artifacts (Harbor's), and verifier/
find /logs -mindepth 1 -maxdepth 1 ! -name artifacts -exec rm -rf {} + 2>/dev/null
mv "$priv/tests" /tests && mkdir -p /logs/verifier && chown -R "$user" /logs || exit 86
# the container's OOM kills and refused forks so far (cgroup v2, else v1): those during the verifier
# are what it met running on the agent's workspace
count() { local k v; while read -r k v; do [ "$k" = "$2" ] && { echo "$v"; return; }; done < "$1"; echo 0; } 2>/dev/null
events() {
  if [ -f /sys/fs/cgroup/memory.events ]; then
    echo "$(count /sys/fs/cgroup/memory.events oom_kill) $(count /sys/fs/cgroup/pids.events max)"
  else
    echo "$(count /sys/fs/cgroup/memory/memory.oom_control oom_kill) $(count /sys/fs/cgroup/pids/pids.events max)"
  fi
}
read -r oom0 forks0 <<< "$(events)"
setpriv --reuid="${user%%:*}" --regid="${user##*:}" --clear-groups \
  timeout -s KILL "$limit" bash /tests/test.sh < /dev/null & p=$!; { wait $p; } 2>/dev/null; rc=$?
read -r oom1 forks1 <<< "$(events)"
bash -c "$reaper" hrbench all > "$priv/reaped" 2>&1
rm -rf /tests; mv /logs/verifier "$priv/verifier"
find /logs -mindepth 1 -maxdepth 1 ! -name artifacts -exec rm -rf {} + 2>/dev/null; chown 0:0 /logs
read -r nonce < "$priv/nonce"
for f in reward.txt reward.json; do
  [ -f "$priv/verifier/$f" ] && [ ! -L "$priv/verifier/$f" ] \
    && { printf '\n%s %s\n' "$nonce" "$f"; head -c 65536 "$priv/verifier/$f"; }
done
# what the verifier met: OOM kills, refused forks, and the workdir's free bytes and inodes
printf '\n%s fault\n%s %s %s' "$nonce" "$((oom1 - oom0)) $((forks1 - forks0))" \
  "$(stat -f -c '%a*%S' . | { read -r x; echo $((x)); })" "$(stat -f -c %d .)"
# the artifact paths present now (as local: none through a symlink on the way; an empty /logs/artifacts is none)
for a in "$@"; do
  q= bad=; IFS=/ read -r -a parts <<< "${a#/}"
  for c in "${parts[@]}"; do q="$q/$c"; [ "$q" != "$a" ] && [ -L "$q" ] && bad=1; done
  [ -n "$bad" ] || { [ ! -L "$a" ] && [ ! -e "$a" ]; } && continue
  [ "$a" = /logs/artifacts ] && [ -d "$a" ] && [ ! -L "$a" ] && [ -z "$(ls -A "$a")" ] && continue
  if [ -L "$a" ]; then kind=link; else kind=path; fi  # the engine's archive would follow a link: not read
  printf '\n%s artifact\n%s %s' "$nonce" "$kind" "$a"
done
exit $rc
