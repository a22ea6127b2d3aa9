// Package dirlock tells why a Pebble data directory could not be opened
// when another process holds it: Pebble locks the directory's LOCK file
// with a POSIX record lock, whose holder the kernel names. Its functions
// are safe for concurrent use and hold nothing open.
package dirlock

import (
	"errors"
	"fmt"
	"path/filepath"
)

// ErrInUse is wrapped by the error of Check for a directory another
// process (or this one) holds.
var ErrInUse = errors.New("data directory in use")

// InUseError says that directory Dir is held, and by which process when
// the lock names it (PID 0: not known, or this process). Its message
// leaves the directory to the caller's context.
type InUseError struct {
	Dir  string
	PID  int
	Self bool // held by this process (another store opened on it)
	Err  error
}

func (e *InUseError) Error() string {
	switch {
	case e.Self:
		return "data directory in use by this process (opened twice)"
	case e.PID > 0:
		return fmt.Sprintf("data directory in use by another psp (pid %d): %v", e.PID, e.Err)
	default:
		return fmt.Sprintf("data directory in use by another psp: %v", e.Err)
	}
}

// Unwrap returns ErrInUse and the error Pebble returned.
func (e *InUseError) Unwrap() []error { return []error{ErrInUse, e.Err} }

// Check turns err, returned by pebble.Open(dir, ...), into an *InUseError
// when it says the directory's lock is held; any other error is returned
// as it is.
func Check(dir string, err error) error {
	if err == nil || dir == "" {
		return err
	}
	if isSelfHeld(err) {
		return &InUseError{Dir: dir, Self: true, Err: err}
	}
	if !isLockBusy(err) {
		return err
	}
	return &InUseError{Dir: dir, PID: holder(filepath.Join(dir, "LOCK")), Err: err}
}
