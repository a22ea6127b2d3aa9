//go:build !linux

package accept

import "syscall"

// abortedHere reports the errors of a pending connection that only this
// system has: none besides those Classify lists.
func abortedHere(syscall.Errno) bool { return false }
