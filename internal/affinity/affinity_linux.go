//go:build linux

package affinity

import (
	"fmt"
	"runtime"
	"slices"

	"golang.org/x/sys/unix"
)

// Pin locks the calling goroutine to its OS thread and restricts the thread
// to cpu. Lock first: the runtime then starts later OS threads from a
// template thread instead of cloning (and inheriting the mask of) this one.
// On error the goroutine stays locked to its thread (unlocking a
// thread whose mask may have changed would let other goroutines inherit it).
func Pin(cpu int) error {
	runtime.LockOSThread()
	if cpu < 0 || cpu >= maxCPU {
		return fmt.Errorf("affinity: pin to cpu %d: out of range", cpu)
	}
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		avail, aerr := Available()
		if aerr == nil {
			return fmt.Errorf("affinity: pin to cpu %d: %w (this process may use %s)", cpu, err, FormatList(avail))
		}
		return fmt.Errorf("affinity: pin to cpu %d: %w", cpu, err)
	}
	return nil
}

// startMask is the process's affinity mask read during package
// initialisation, which the runtime runs on the main thread before any
// goroutine can pin a thread. It is never written afterwards.
var startMask, startMaskErr = maskOf(0)

// Available returns the CPUs this process may run on, sorted: the affinity
// mask the process started with (taskset, cgroup cpusets). Threads pinned
// with Pin do not narrow it, even when the runtime happened to run the
// pinned goroutine on the main thread.
func Available() ([]int, error) {
	if startMaskErr != nil {
		return nil, startMaskErr
	}
	return slices.Clone(startMask), nil
}

// maskOf returns the affinity mask of thread tid (0: the calling thread).
func maskOf(tid int) ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(tid, &set); err != nil {
		return nil, fmt.Errorf("affinity: read affinity mask: %w", err)
	}
	cpus := make([]int, 0, set.Count())
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}
