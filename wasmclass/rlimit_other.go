//go:build !unix

package wasmclass

import "errors"

// limitAddressSpace is not available: the compile child would run
// unbounded, so it refuses.
func limitAddressSpace(uint64) error {
	return errors.New("address space limits are not supported on this system")
}
