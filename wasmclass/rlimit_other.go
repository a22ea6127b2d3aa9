//go:build !unix

package wasmclass

import (
	"errors"
	"os"
)

func childMaxRSS(*os.ProcessState) int64 { return 0 }

// limitAddressSpace is not available: the compile child would run
// unbounded, so it refuses.
func limitAddressSpace(uint64) error {
	return errors.New("address space limits are not supported on this system")
}
