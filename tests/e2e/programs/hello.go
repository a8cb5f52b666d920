package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

func main() {
	fmt.Println("hello")
	fmt.Println(strings.Join(os.Args[1:], " "))
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	fmt.Println(strings.TrimSpace(line))
	in, err := os.ReadFile("in.txt")
	if err != nil {
		os.Exit(1)
	}
	fmt.Println(strings.TrimSpace(string(in)))
	if os.WriteFile("artifacts/out.txt", []byte("made by go\n"), 0644) != nil {
		os.Exit(1)
	}
}
