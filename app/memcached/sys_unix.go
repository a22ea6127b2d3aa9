//go:build unix

package memcached

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// freeDiskSpace returns the bytes an unprivileged writer may still write
// on dir's file system, or -1 when it cannot be read.
func freeDiskSpace(dir string) int64 {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// processCPU returns the CPU time the process has used in user and in
// system mode (memcached's rusage_user and rusage_system).
func processCPU() (user, system time.Duration) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
