# Expected expenses from the bank export and rules: prints `day|category|cents|note` lines.
import csv, json, sys
rules = json.load(open(sys.argv[2] if len(sys.argv) > 2 else "/app/inbox/rules.json"))
for r in csv.DictReader(open(sys.argv[1], newline=""), delimiter=";"):
    a = r["Amount"].strip().replace(",", ".")
    neg = a.startswith("-")
    units, _, frac = a.lstrip("-+").partition(".")
    c = int(units) * 100 + int((frac + "00")[:2])
    if not neg or c == 0:
        continue
    d, m, y = r["Date"].strip().split(".")
    desc = r["Description"].strip()
    cat = next((x["category"] for x in rules["rules"] if x["match"].lower() in desc.lower()), rules["default"])
    print(f"{y}-{m}-{d}|{cat}|{c}|{desc}")
