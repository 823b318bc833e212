#!/bin/bash
cd /app
cat > tools/dedupe.py <<'PY'
#!/usr/bin/env python3
"""Copy stdin to stdout, dropping every line that already appeared earlier."""
import sys

seen = set()
for line in sys.stdin.read().splitlines():
# hrbench:key-begin
    if line in seen:
        continue
# hrbench:key-end
    seen.add(line)
    print(line)
PY
