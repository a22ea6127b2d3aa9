package wasmclass

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// childSysProcAttr makes the kernel kill a compile child when the thread
// that started it exits (compileInChild keeps that thread locked while the
// child runs), so a dead parent leaves no compiler running.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// limitChild sets l on the child pid (prlimit), before it is sent any
// work.
func limitChild(pid int, l childLimits) error {
	for _, r := range l.rlimits() {
		if raceBuild && r.resource == unix.RLIMIT_AS {
			continue // see raceBuild: the child sets it (limitSelf)
		}
		lim := unix.Rlimit{Cur: r.max, Max: r.max}
		if err := unix.Prlimit(pid, r.resource, &lim, nil); err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
	}
	return nil
}
