#!/bin/bash
source /tests/checks.sh
F=/app/out/sales_clean.csv
EXP="$(awk -f /tests/clean.awk /tests/pristine/data/sales_raw.csv | sort -t, -k1,1n)"
expect_file clean_file "$F"
expect_eq header "$(head -n 1 "$F" 2>/dev/null)" "order_id,date,region,product_code,qty,unit_price"
expect_eq row_count "$(rows "$F" order_id)" "$(printf '%s\n' "$EXP" | grep -c .)" int
expect_eq order_ids "$(column "$F" order_id)" "$(printf '%s\n' "$EXP" | cut -d, -f1)" seq
expect_eq regions "$(column "$F" region)" "$(printf '%s\n' "$EXP" | cut -d, -f3)" seq
expect_eq dates "$(column "$F" date)" "$(printf '%s\n' "$EXP" | cut -d, -f2)" seq
expect_eq qtys "$(column "$F" qty)" "$(printf '%s\n' "$EXP" | cut -d, -f5)" seq
expect_eq prices "$(column "$F" unit_price)" "$(printf '%s\n' "$EXP" | cut -d, -f6)" seq
expect_eq region_lowercase "$(column "$F" region | grep -c '[A-Z]')" 0 int
expect_eq price_format "$(column "$F" unit_price | grep -cvE '^[0-9]+\.[0-9][0-9]$')" 0 int
finish
