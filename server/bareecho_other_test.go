//go:build !linux

package server

import "testing"

// bareEcho is BenchmarkLoneGet's floor; it needs Linux's SO_TIMESTAMPNS.
type bareEcho struct{ addr string }

// startBareEcho skips: the floor is measured on Linux only.
func startBareEcho(b *testing.B) *bareEcho {
	b.Skip("the bare echo floor needs Linux (SO_TIMESTAMPNS)")
	return nil
}

func (e *bareEcho) reset() {}

func (e *bareEcho) stop(*testing.B) (latency, receive, transmit durations) { return nil, nil, nil }
