package server

import (
	"fmt"
	"os"
	"testing"
)

// TestMain runs the tests, or, with loneClientEnv set, is the lone client
// of BenchmarkLoneGet (a process of its own, as a real client is), or,
// with fdChildEnv set, the server of TestAdminFloodUnderFileLimit.
func TestMain(m *testing.M) {
	if spec := os.Getenv(loneClientEnv); spec != "" {
		if err := loneClient(spec); err != nil {
			fmt.Fprintln(os.Stderr, "lone client:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if limit := os.Getenv(fdChildEnv); limit != "" {
		if err := runFDChild(limit); err != nil {
			fmt.Fprintln(os.Stderr, "fd child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
