//go:build unix

package wasmclass

import "golang.org/x/sys/unix"

// limitAddressSpace caps the process's address space (RLIMIT_AS).
func limitAddressSpace(bytes uint64) error {
	return unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: bytes, Max: bytes})
}
