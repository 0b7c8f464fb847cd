// Command wordcount prints the words of its standard input, most frequent
// first.
package main

import (
	"fmt"
	"os"

	"example.com/wordcount/wordcount"
)

func main() {
	counts, err := wordcount.Counts(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wordcount:", err)
		os.Exit(1)
	}
	for _, c := range counts {
		fmt.Printf("%7d %s\n", c.N, c.Word)
	}
}
