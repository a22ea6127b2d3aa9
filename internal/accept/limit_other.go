//go:build !unix

package accept

import "errors"

// FileLimit reports that the platform has no RLIMIT_NOFILE.
func FileLimit() (soft, hard uint64, err error) {
	return 0, 0, errors.ErrUnsupported
}
