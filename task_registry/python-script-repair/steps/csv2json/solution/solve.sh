#!/bin/bash
cd /app
python3 - <<'PY'
p = "tools/csv2json.py"
s = open(p).read()
s = s.replace("out = [dict(zip(rows[0], r)) for r in rows]", "out = [dict(zip(rows[0], r)) for r in rows[1:]]")
# hrbench:key-begin
s = s.replace("def convert(value):\n    return value\n", '''def convert(value):
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value
''')
# hrbench:key-end
open(p, "w").write(s)
PY
