#!/bin/bash
cd /app
cat > tools/duration.py <<'PY'
#!/usr/bin/env python3
"""Print the number of seconds in a duration such as 1h30m, 45s, 2d or 1h5m10s."""
import re
import sys

# hrbench:key-begin
UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
# hrbench:key-end


def seconds(text):
    if not re.fullmatch(r"(\d+[dhms])+", text):
        raise ValueError(text)
    return sum(int(num) * UNITS[unit] for num, unit in re.findall(r"(\d+)([dhms])", text))


if __name__ == "__main__":
    try:
        print(seconds(sys.argv[1]))
    except ValueError:
        print(f"invalid duration: {sys.argv[1]}", file=sys.stderr)
        sys.exit(2)
PY
