#!/bin/bash
cd /app
# hrbench:step
cat steps/01.txt
echo "step1: $(sed '1,/^data:$/d' steps/01.txt | awk '{ print $2 }' | sort -n | tail -n 1)" >> answers.txt
openssl enc -aes-256-cbc -pbkdf2 -d -pass "pass:$(sed -n 's/^step1: //p' answers.txt)" -in steps/02.enc > steps/02.txt
cat steps/02.txt
# hrbench:step reads-output
echo "step2: $(sed '1,/^data:$/d' steps/02.txt | awk '{ print $2 }' | sort -n | tail -n 1)" >> answers.txt
openssl enc -aes-256-cbc -pbkdf2 -d -pass "pass:$(sed -n 's/^step2: //p' answers.txt)" -in steps/03.enc > steps/03.txt
cat steps/03.txt
# hrbench:step reads-output
echo "step3: $(sed '1,/^data:$/d' steps/03.txt | sed -n '3p' | awk '{ print $1 }')" >> answers.txt
openssl enc -aes-256-cbc -pbkdf2 -d -pass "pass:$(sed -n 's/^step3: //p' answers.txt)" -in steps/04.enc > steps/04.txt
cat steps/04.txt
# hrbench:step reads-output
echo "step4: $(sed '1,/^data:$/d' steps/04.txt | sed -n '11p' | awk '{ print $1 }')" >> answers.txt
openssl enc -aes-256-cbc -pbkdf2 -d -pass "pass:$(sed -n 's/^step4: //p' answers.txt)" -in steps/05.enc > steps/05.txt
cat steps/05.txt
# hrbench:step reads-output
echo "step5: $(sed '1,/^data:$/d' steps/05.txt | awk '$1 == "harbor" { s += $2 } END { print s }')" >> answers.txt
openssl enc -aes-256-cbc -pbkdf2 -d -pass "pass:$(sed -n 's/^step5: //p' answers.txt)" -in steps/06.enc > steps/06.txt
cat steps/06.txt
# hrbench:step reads-output
echo "step6: $(sed '1,/^data:$/d' steps/06.txt | awk '{ print $2 }' | sort -n | tail -n 1)" >> answers.txt
openssl enc -aes-256-cbc -pbkdf2 -d -pass "pass:$(sed -n 's/^step6: //p' answers.txt)" -in steps/07.enc > steps/07.txt
cat steps/07.txt
# hrbench:step reads-output
echo "step7: $(sed '1,/^data:$/d' steps/07.txt | sed -n '22p' | awk '{ print $1 }')" >> answers.txt
openssl enc -aes-256-cbc -pbkdf2 -d -pass "pass:$(sed -n 's/^step7: //p' answers.txt)" -in steps/08.enc > steps/08.txt
cat steps/08.txt
# hrbench:step reads-output
echo "step8: $(sed '1,/^data:$/d' steps/08.txt | awk '{ print $2 }' | sort -n | tail -n 1)" >> answers.txt
openssl enc -aes-256-cbc -pbkdf2 -d -pass "pass:$(sed -n 's/^step8: //p' answers.txt)" -in steps/09.enc > steps/09.txt
cat steps/09.txt
# hrbench:step reads-output
echo "step9: $(sed '1,/^data:$/d' steps/09.txt | sed -n '22p' | awk '{ print $1 }')" >> answers.txt
openssl enc -aes-256-cbc -pbkdf2 -d -pass "pass:$(sed -n 's/^step9: //p' answers.txt)" -in steps/10.enc > steps/10.txt
cat steps/10.txt
# hrbench:step reads-output
# hrbench:key-begin
echo "step10: $(sed '1,/^data:$/d' steps/10.txt | awk '$1 == "birch" { s += $2 } END { print s }')" >> answers.txt
# hrbench:key-end
