#!/bin/bash
cd /app
rm -rf /tmp/pkg && mkdir -p /tmp/pkg/report dist
cp work/status_counts.txt work/top_paths.csv /tmp/pkg/report/
# hrbench:key-begin
(cd /tmp/pkg/report && sha256sum status_counts.txt top_paths.csv > SHA256SUMS)
# hrbench:key-end
tar -czf dist/report.tar.gz -C /tmp/pkg report
