#!/bin/bash
cd /app
# hrbench:key-begin
cat >> output.txt <<'HRB_EOF'
[7]ruru buda
[8]meniva gozeka
[9]meniva sotobe
HRB_EOF
# hrbench:key-end
