//go:build !unix

package wasmclass

import (
	"errors"
	"os"
	"syscall"
)

func childMaxRSS(*os.ProcessState) int64 { return 0 }

// limitSelf is not available: the compile child would run unbounded, so
// it refuses.
func limitSelf(childLimits) error {
	return errors.New("resource limits are not supported on this system")
}

func childSysProcAttr() *syscall.SysProcAttr { return nil }

func limitChild(int, childLimits) error { return nil }
