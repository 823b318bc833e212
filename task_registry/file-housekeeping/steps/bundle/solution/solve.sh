#!/bin/bash
cd /app/docs
# hrbench:key-begin
tar -czf /app/docs.tar.gz -- *.md
# hrbench:key-end
