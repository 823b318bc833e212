#!/usr/bin/env python3
"""Convert a CSV file (with a header line) to a JSON array of objects on stdout."""
import csv
import json
import sys


def convert(value):
    return value


def main(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    out = [dict(zip(rows[0], r)) for r in rows]
    json.dump([{k: convert(v) for k, v in r.items()} for r in out], sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
