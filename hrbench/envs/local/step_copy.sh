#!/bin/bash
# A step's workdir/ files ($1, bound read-only) copied into WORKDIR ($2) by the sandbox itself.
# The step's files win over what the agent left at their paths (Harbor's upload overwrites): a symlink
# or a non-directory where the step has a directory is removed first, and files replace files.
files=$1 W=$2
cd "$files" && find . -mindepth 1 -type d -print0 | while IFS= read -r -d '' d; do
  t="$W/$d"; if [ -L "$t" ] || { [ -e "$t" ] && [ ! -d "$t" ]; }; then rm -f "$t"; fi; done
cp -R -P --remove-destination --preserve=mode,timestamps,links "$files"/. "$W/" \
  || { echo 'hrbench: copying the step workdir/ files failed'; exit 1; }
