#!/usr/bin/env python3
"""Print the number of seconds in a duration such as 1h30m, 45s, 2d or 1h5m10s."""
import re
import sys

UNITS = {"d": 86400, "h": 3600, "m": 3600, "s": 1}


def seconds(text):
    total = 0
    for num, unit in re.findall(r"(\d+)([dhms])", text):
        total += int(num) * UNITS[unit]
    return total


if __name__ == "__main__":
    print(seconds(sys.argv[1]))
