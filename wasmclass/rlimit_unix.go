//go:build unix

package wasmclass

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// childMaxRSS returns a finished child's peak resident memory in bytes.
func childMaxRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss << 10 // KiB on Linux
	}
	return 0
}

// limitSelf sets l on the calling process (a compile child) and checks
// that the limits in force are at most l's: address space (RLIMIT_AS),
// CPU time (RLIMIT_CPU, whose hard limit kills) and open files
// (RLIMIT_NOFILE).
func limitSelf(l childLimits) error {
	for _, r := range l.rlimits() {
		var lim unix.Rlimit
		setRlim(&lim.Cur, r.max)
		setRlim(&lim.Max, r.max)
		if err := unix.Setrlimit(r.resource, &lim); err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		if err := unix.Getrlimit(r.resource, &lim); err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		if uint64(lim.Max) > r.max || uint64(lim.Cur) > r.max {
			return fmt.Errorf("%s is %d, want at most %d", r.name, lim.Max, r.max)
		}
	}
	return nil
}

type rlimit struct {
	name     string
	resource int
	max      uint64
}

func (l childLimits) rlimits() []rlimit {
	var rs []rlimit
	if l.addressSpace > 0 {
		rs = append(rs, rlimit{"address space", unix.RLIMIT_AS, l.addressSpace})
	}
	if l.cpuSeconds > 0 {
		rs = append(rs, rlimit{"CPU time", unix.RLIMIT_CPU, l.cpuSeconds})
	}
	if l.files > 0 {
		rs = append(rs, rlimit{"open files", unix.RLIMIT_NOFILE, l.files})
	}
	return rs
}

// setRlim sets a field of unix.Rlimit, a uint64 on Linux and an int64 on
// the BSDs.
func setRlim[T int64 | uint64](field *T, v uint64) { *field = T(v) }
