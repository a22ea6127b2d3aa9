package accept

import "syscall"

// abortedHere reports the errors of a pending connection that only this
// system has (accept(2), Linux notes: ENONET).
func abortedHere(errno syscall.Errno) bool { return errno == syscall.ENONET }
