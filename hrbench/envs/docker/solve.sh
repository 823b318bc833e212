#!/bin/bash
# Harbor's oracle, as local runs it: the step's solution/ folder at /solution (root's, read-only to the
# agent user), `bash /solution/solve.sh` run from WORKDIR as the agent user (so $0, BASH_SOURCE and
# sibling helpers work), bounded and its process group killed after, as an agent command; /solution is
# removed after. Exit 86: the folder could not be put in place.
priv=$1 limit=$2 user=$3
rm -rf /solution && mv "$priv/solution" /solution && rm -rf "$priv" || exit 86
setpriv --reuid="${user%%:*}" --regid="${user##*:}" --clear-groups \
  timeout -s KILL "$limit" bash /solution/solve.sh < /dev/null & p=$!; { wait $p; } 2>/dev/null; rc=$?
kill -KILL -- -$p 2>/dev/null; rm -rf /solution
exit $rc
