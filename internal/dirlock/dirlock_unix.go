//go:build unix

package dirlock

import (
	"errors"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// isLockBusy reports whether err is a refused POSIX lock.
func isLockBusy(err error) bool {
	return errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES)
}

// isSelfHeld reports whether err is Pebble's refusal of a lock this
// process holds.
func isSelfHeld(err error) bool {
	return strings.Contains(err.Error(), "lock held by current process")
}

// holder returns the pid of the process holding a write lock on the file
// at path, or 0.
func holder(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
	if err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk); err != nil || lk.Type == unix.F_UNLCK {
		return 0
	}
	return int(lk.Pid)
}
