//go:build unix

package wasmclass

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// childMaxRSS returns a finished child's peak resident memory in bytes.
func childMaxRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss << 10 // KiB on Linux
	}
	return 0
}

// limitAddressSpace caps the process's address space (RLIMIT_AS).
func limitAddressSpace(bytes uint64) error {
	return unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: bytes, Max: bytes})
}
