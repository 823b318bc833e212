#!/bin/bash
cd /app
# hrbench:step
echo "step1: $(< data/s01.txt awk '$1 == "cedar" { s += $2 } END { print s }')" >> answers.txt
# hrbench:step
echo "step2: $(< data/s02.txt awk '{ print $2 }' | sort -n | tail -n 1)" >> answers.txt
# hrbench:step
echo "step3: $(< data/s03.txt awk '$1 == "cedar"' | wc -l)" >> answers.txt
# hrbench:step
echo "step4: $(< data/s04.txt sed -n '16p' | awk '{ print $1 }')" >> answers.txt
# hrbench:step
echo "step5: $(< data/s05.txt awk '$1 == "cedar" { s += $2 } END { print s }')" >> answers.txt
# hrbench:step
echo "step6: $(< data/s06.txt awk '{ print $2 }' | sort -n | tail -n 1)" >> answers.txt
# hrbench:step
echo "step7: $(< data/s07.txt awk '$1 == "cedar" { s += $2 } END { print s }')" >> answers.txt
# hrbench:step
echo "step8: $(< data/s08.txt sed -n '19p' | awk '{ print $1 }')" >> answers.txt
# hrbench:step
echo "step9: $(< data/s09.txt awk '{ print $1 }' | sort -u | wc -l)" >> answers.txt
# hrbench:step
# hrbench:key-begin
echo "step10: $(< data/s10.txt awk '{ print $1 }' | sort -u | wc -l)" >> answers.txt
# hrbench:key-end
