#!/bin/bash
cd /app
tail -n +2 backup/MANIFEST.tsv | cut -f1 | sed 's#^#project/#' > /tmp/list.txt
# hrbench:key-begin
tar -czf backup/project.tar.gz --no-recursion -T /tmp/list.txt
# hrbench:key-end
