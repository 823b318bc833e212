#!/usr/bin/env python3
"""Print a URL slug for the title given as the first argument."""
import sys


def slugify(title):
    return title.lower().replace(" ", "-")


if __name__ == "__main__":
    print(slugify(sys.argv[1]))
