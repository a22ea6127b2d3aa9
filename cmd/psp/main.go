// Command psp runs the psp request dispatcher, its simulator, load generator
// and classifier tools. Run "psp --help" for the list of subcommands.
package main

import (
	"fmt"
	"os"

	"github.com/persephone-go/psp/wasmclass"
)

func main() {
	wasmclass.RunCompileChild() // psp compiles uploaded classifiers in a child of itself
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "psp:", err)
		os.Exit(1)
	}
}
