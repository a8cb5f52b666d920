import sys
print("hello")
print(" ".join(sys.argv[1:]))
print(sys.stdin.readline().strip())
print(open("in.txt").read().strip())
open("artifacts/out.txt", "w").write("made by python\n")
