//go:build unix && !linux

package wasmclass

import "syscall"

// childSysProcAttr: no parent-death signal on this system; the child's
// CPU limit bounds an orphan.
func childSysProcAttr() *syscall.SysProcAttr { return nil }

// limitChild: no prlimit on this system; the child sets its own limits
// (limitSelf) before it reads the module.
func limitChild(int, childLimits) error { return nil }
