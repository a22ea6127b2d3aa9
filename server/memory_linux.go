package server

import "golang.org/x/sys/unix"

// machineMemory returns the machine's physical memory in bytes.
func machineMemory() (uint64, bool) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil || si.Totalram == 0 {
		return 0, false
	}
	return uint64(si.Totalram) * uint64(max(si.Unit, 1)), true
}
