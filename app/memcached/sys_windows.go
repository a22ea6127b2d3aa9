package memcached

import (
	"time"

	"golang.org/x/sys/windows"
)

// freeDiskSpace returns the bytes the process may still write on dir's
// volume, or -1 when it cannot be read.
func freeDiskSpace(dir string) int64 {
	path, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return -1
	}
	var avail uint64
	if windows.GetDiskFreeSpaceEx(path, &avail, nil, nil) != nil {
		return -1
	}
	return int64(avail)
}

// processCPU returns the CPU time the process has used in user and in
// kernel mode (memcached's rusage_user and rusage_system).
func processCPU() (user, system time.Duration) {
	var creation, exit, kernel, usr windows.Filetime
	if windows.GetProcessTimes(windows.CurrentProcess(), &creation, &exit, &kernel, &usr) != nil {
		return 0, 0
	}
	// A Filetime counts 100-nanosecond intervals.
	ticks := func(ft windows.Filetime) time.Duration {
		return time.Duration(uint64(ft.HighDateTime)<<32|uint64(ft.LowDateTime)) * 100
	}
	return ticks(usr), ticks(kernel)
}
