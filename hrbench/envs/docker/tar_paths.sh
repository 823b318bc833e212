#!/bin/bash
# A tar of the paths given that exist (the workdir and the persisted paths), on stdout, as root.
cd / || exit 2
have=()
for p in "$@"; do [ -e "${p#/}" ] && [ ! -L "${p#/}" ] && have+=("${p#/}"); done
[ ${#have[@]} -gt 0 ] || exit 0
exec tar -cf - --no-wildcards -- "${have[@]}"
