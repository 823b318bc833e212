from util import greet

print(greet("world"))
