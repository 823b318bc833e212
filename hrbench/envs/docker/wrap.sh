#!/bin/bash
# The agent's command, bounded by `timeout` (which signals its whole process group), and
# whatever it left running in that group killed after it: as with local, where a command's
# sandbox dies with it, a background job does not outlive its command.
timeout -s KILL "$1" bash -c "$2" & p=$!; { wait $p; } 2>/dev/null; rc=$?; kill -KILL -- -$p 2>/dev/null; exit $rc
