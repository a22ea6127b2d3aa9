//go:build unix

package accept

import "syscall"

// FileLimit returns the process's RLIMIT_NOFILE: the soft limit (what
// opening a file checks; Go's runtime raised it to the hard limit, less
// one, at start) and the hard one.
func FileLimit() (soft, hard uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, err
	}
	return uint64(lim.Cur), uint64(lim.Max), nil
}
