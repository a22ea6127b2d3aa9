package wasmclass

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	RunCompileChild() // this test binary serves as the compile child
	if os.Getenv(orphanHelperEnv) != "" {
		os.Exit(orphanHelper()) // see TestCompileChildDiesWithParent
	}
	os.Exit(m.Run())
}
