#!/bin/bash
cd /app
cat > tools/slugify.py <<'PY'
#!/usr/bin/env python3
"""Print a URL slug for the title given as the first argument."""
import re
import sys


def slugify(title):
    s = title.lower()
# hrbench:key-begin
    s = re.sub(r"[^a-z0-9]+", "-", s).strip("-")
# hrbench:key-end
    return s


if __name__ == "__main__":
    print(slugify(sys.argv[1]))
PY
