// Package testenv lets tests depend on optional tools (clang, wat2wasm,
// DPDK, network namespaces, ...) without hiding missing ones in CI: a missing
// requirement skips the test on a developer's machine and fails it when the
// environment variable CI is "true". It also holds the helpers several
// packages' tests share (Child, SyncBuffer).
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// InCI reports whether the tests run in CI (CI=true), where nothing may be
// skipped for a missing tool.
func InCI() bool { return os.Getenv("CI") == "true" }

// Skip skips the test with the given reason, or fails it in CI.
func Skip(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if InCI() {
		tb.Fatalf("required in CI but unavailable: "+format, args...)
	}
	tb.Skipf(format, args...)
}

// RequireTool returns the path of the named executable, skipping the test
// (failing it in CI) when it is not on PATH.
func RequireTool(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Skip(tb, "%s not found on PATH", name)
	}
	return p
}

// RequireRoot skips the test (fails it in CI) unless it runs as root.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		Skip(tb, "needs root")
	}
}
