//go:build !linux

package server

// machineMemory is unknown off Linux: the pool's size is not checked
// against it.
func machineMemory() (uint64, bool) { return 0, false }
