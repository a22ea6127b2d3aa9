//go:build linux

package sockstat

import (
	"os"
	"strconv"
	"strings"
)

// BacklogDrops returns the packets the kernel dropped before any socket,
// its per-CPU input backlog being full (/proc/net/softnet_stat's second
// column), machine-wide since boot; ok is false when it cannot be read.
func BacklogDrops() (n uint64, ok bool) {
	b, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			v, _ := strconv.ParseUint(f[1], 16, 64)
			n += v
		}
	}
	return n, true
}
