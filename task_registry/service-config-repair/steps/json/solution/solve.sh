#!/bin/bash
cd /app
# hrbench:key-begin
sed -i -E 's/,[[:space:]]*\]/]/; s/\},[[:space:]]*$/}/' etc/app.json
# hrbench:key-end
python3 - <<'PY'
import json
p = "etc/app.json"
d = json.load(open(p))
d["port"] = 8080
d["debug"] = False
json.dump(d, open(p, "w"), indent=2)
PY
