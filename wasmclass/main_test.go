package wasmclass

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	RunCompileChild() // this test binary serves as the compile child
	os.Exit(m.Run())
}
