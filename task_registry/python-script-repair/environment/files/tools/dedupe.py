#!/usr/bin/env python3
"""Copy stdin to stdout, dropping every line that already appeared earlier."""
import sys

lines = sys.stdin.read().splitlines()
for line in sorted(set(lines)):
    print(line)
