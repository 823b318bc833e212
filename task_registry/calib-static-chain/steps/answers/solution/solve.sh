#!/bin/bash
cd /app
# hrbench:step
echo "step1: $(awk -v k="2ae75e" '$1 == k { print $2 }' chain/s01.txt)" >> answers.txt
# hrbench:step
echo "step2: $(awk -v k="$(sed -n 's/^step1: //p' answers.txt)" '$1 == k { print $2 }' chain/s02.txt)" >> answers.txt
# hrbench:step
echo "step3: $(awk -v k="$(sed -n 's/^step2: //p' answers.txt)" '$1 == k { print $2 }' chain/s03.txt)" >> answers.txt
# hrbench:step
echo "step4: $(awk -v k="$(sed -n 's/^step3: //p' answers.txt)" '$1 == k { print $2 }' chain/s04.txt)" >> answers.txt
# hrbench:step
echo "step5: $(awk -v k="$(sed -n 's/^step4: //p' answers.txt)" '$1 == k { print $2 }' chain/s05.txt)" >> answers.txt
# hrbench:step
echo "step6: $(awk -v k="$(sed -n 's/^step5: //p' answers.txt)" '$1 == k { print $2 }' chain/s06.txt)" >> answers.txt
# hrbench:step
echo "step7: $(awk -v k="$(sed -n 's/^step6: //p' answers.txt)" '$1 == k { print $2 }' chain/s07.txt)" >> answers.txt
# hrbench:step
echo "step8: $(awk -v k="$(sed -n 's/^step7: //p' answers.txt)" '$1 == k { print $2 }' chain/s08.txt)" >> answers.txt
# hrbench:step
echo "step9: $(awk -v k="$(sed -n 's/^step8: //p' answers.txt)" '$1 == k { print $2 }' chain/s09.txt)" >> answers.txt
# hrbench:step
# hrbench:key-begin
echo "step10: $(awk -v k="$(sed -n 's/^step9: //p' answers.txt)" '$1 == k { print $2 }' chain/s10.txt)" >> answers.txt
# hrbench:key-end
