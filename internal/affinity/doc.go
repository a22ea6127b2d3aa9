// Package affinity pins OS threads to CPUs and validates CPU lists.
//
// Pin locks the calling goroutine to its OS thread (runtime.LockOSThread)
// and restricts that thread to one CPU; the goroutine keeps the thread until
// it calls runtime.UnlockOSThread or exits (in which case the runtime
// destroys the pinned thread rather than reuse it). Available reports the
// CPUs this process may run on (its affinity mask, which containers and
// taskset narrow), and Validate refuses CPU lists naming CPUs outside it.
//
// All functions are safe for concurrent use and hold no resources. Pinning
// is implemented on Linux only; elsewhere Pin and Available return errors
// wrapping ErrNotSupported.
package affinity
