#!/bin/bash
# Usage: count_words.sh FILE
# Prints three lines about FILE:  lines: N   words: N   longest: WORD
f=$1
echo "lines: $(wc -l < $f)"
echo "words: $(wc -c < $f)"
echo "longest: $(tr -s ' ' '\n' < $f | awk '{ print length, $0 }' | sort -n | head -n 1 | cut -d' ' -f2-)"
