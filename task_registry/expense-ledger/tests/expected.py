# Expected expenses from a bank export and a rules file: prints `day|category|cents|note` lines.
# Both default to the pristine copies shipped with the tests (never the workspace's).
import csv, json, sys
export = sys.argv[1] if len(sys.argv) > 1 else "/tests/pristine/inbox/bank_export.csv"
rules = json.load(open(sys.argv[2] if len(sys.argv) > 2 else "/tests/pristine/inbox/rules.json"))
for r in csv.DictReader(open(export, newline=""), delimiter=";"):
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
