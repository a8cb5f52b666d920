echo hello
echo "$*"
read -r line; echo "$line"
cat in.txt
echo "made by bash" >artifacts/out.txt
