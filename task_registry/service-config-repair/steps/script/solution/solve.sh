#!/bin/bash
cd /app
cat > bin/count_words.sh <<'SH'
#!/bin/bash
# Usage: count_words.sh FILE
# Prints three lines about FILE:  lines: N   words: N   longest: WORD
f="$1"
echo "lines: $(wc -l < "$f")"
# hrbench:key-begin
echo "words: $(wc -w < "$f")"
echo "longest: $(tr -s ' \t' '\n\n' < "$f" | awk 'length($0) > max { max = length($0); w = $0 } END { print w }')"
# hrbench:key-end
SH
chmod +x bin/count_words.sh
