package main

import "testing"

func TestDataplaneLabel(t *testing.T) {
	for _, c := range []struct{ dataplane, listen, want string }{
		{"udp", "udp://127.0.0.1:6789", "udp sockets"},
		{"udp", "127.0.0.1:6789", "udp sockets"},
		{"udp", "tcp://127.0.0.1:6379", "tcp sockets"},
		{"udp", "127.0.0.1:6789,tcp://127.0.0.1:6790", "udp+tcp sockets"},
		{"udp", "tcp://127.0.0.1:1, tcp://127.0.0.1:2", "tcp sockets"},
		{"dpdk", "10.0.0.1:6789", "dpdk"},
		{"memnic", "127.0.0.1:6789", "memnic"},
	} {
		if got := dataplaneLabel(c.dataplane, c.listen); got != c.want {
			t.Errorf("dataplaneLabel(%q, %q) = %q, want %q", c.dataplane, c.listen, got, c.want)
		}
	}
}
