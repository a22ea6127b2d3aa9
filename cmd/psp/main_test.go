package main

import (
	"os"
	"testing"

	"github.com/persephone-go/psp/wasmclass"
)

// TestMain lets this test binary serve as the classifier compile child, as
// psp itself does (psp serve compiles uploads in a child of itself).
func TestMain(m *testing.M) {
	wasmclass.RunCompileChild()
	os.Exit(m.Run())
}
