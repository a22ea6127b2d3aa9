package main

import (
	"strings"
	"testing"
)

// TestClientValueSizeFitsADatagram: a memcached value size whose sets
// cannot fit one UDP datagram is refused up front (it failed at the
// preload, asking whether a memcached server was listening).
func TestClientValueSizeFitsADatagram(t *testing.T) {
	for _, size := range []string{"70000", "65476"} {
		out, err := runWithin(t, "client", "--server", "127.0.0.1:9", "--format", "memcached", "--workload", "memcached",
			"--rate", "1000", "--duration", "1s", "--preload", "--value-size", size)
		if err == nil || !strings.Contains(err.Error(), "--value-size "+size+": at most 65475") {
			t.Errorf("--value-size %s: %v\n%s", size, err, out)
		}
	}
}
