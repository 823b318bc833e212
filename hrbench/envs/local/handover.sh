#!/bin/bash
# A separate verifier's inputs moved between two sandboxes through one tar, $2 (`-`: stdout), which
# only sandboxes read and write (the host never opens what the agent made; docs/security.md). The docker
# backend runs `out` too, as root in the agent's container, and hands the tar to the engine.
# `out PATH...`: in the agent's sandbox, a tar of the paths present, none reached through a symlink on
#   the way (a symlink at the path itself is kept as a link, never followed: tar's default).
# `in`: in the verifier's fresh sandbox, the tar extracted at / (the paths land where they were).
mode=$1 archive=$2; shift 2
cd / || exit 2
if [ "$mode" = in ]; then
  [ -f "$archive" ] || exit 0
  exec tar -xpf "$archive" --no-same-owner
fi
have=()
for a in "$@"; do
  q= bad=; IFS=/ read -r -a parts <<< "${a#/}"
  for c in "${parts[@]}"; do q="$q/$c"; [ "$q" != "$a" ] && [ -L "$q" ] && bad=1; done
  [ -n "$bad" ] && continue
  { [ -e "$a" ] || [ -L "$a" ]; } && have+=("${a#/}")
done
[ ${#have[@]} -gt 0 ] || exit 0
exec tar -cf "$archive" --no-wildcards -- "${have[@]}"
