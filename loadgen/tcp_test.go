package loadgen

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/persephone-go/psp/app/memcached/memcachedtest"
	"github.com/persephone-go/psp/internal/connpick"
	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/wire"
)

// startTCPEcho serves psp headers over TCP: each 16-byte request is
// echoed after sleeping its service time; a connection's requests are
// answered in order.
func startTCPEcho(t *testing.T) string {
	t.Helper()
	return testenv.TCPServer(t, func(c net.Conn) {
		var h [wire.HeaderLen]byte
		for {
			if _, err := io.ReadFull(c, h[:]); err != nil {
				return
			}
			hd, _ := wire.Decode(h[:])
			time.Sleep(time.Duration(hd.ServiceNs))
			if _, err := c.Write(h[:]); err != nil {
				return
			}
		}
	})
}

// TestRunOverTCP: the psp format over several connections, pipelined when
// requests come close together: every reply matched to its request.
func TestRunOverTCP(t *testing.T) {
	addr := startTCPEcho(t)
	sched, err := NewSchedule(highBimodal(t), 3000, 300*time.Millisecond, 1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Spec{Server: TCPScheme + addr, Conns: 4, MaxLag: time.Second, Grace: 10 * time.Second}, sched)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(sched.Requests))
	if res.Sent != n || res.Answered != n || res.Lost != 0 || res.BadReplies != 0 {
		t.Fatalf("sent %d answered %d lost %d bad %d of %d", res.Sent, res.Answered, res.Lost, res.BadReplies, n)
	}
	if res.Conns != 4 {
		t.Errorf("result's connections %d, want 4", res.Conns)
	}
	for i, ts := range res.Types {
		if float64(ts.P50Latency) < sched.Types[i].MeanServiceNs {
			t.Errorf("%s: p50 latency %vns below its service time", ts.Name, ts.P50Latency)
		}
	}
	// A server that is not there: a clear error.
	if _, err := Run(context.Background(), Spec{Server: TCPScheme + "127.0.0.1:1"}, sched); err == nil {
		t.Error("no error without a server")
	}
}

// TestConnPick: a long request on one of two connections; the short ones
// after it go on the idle connection by default, as a client library's
// pool sends them, and on their turn's connection, behind the long one,
// round robin.
func TestConnPick(t *testing.T) {
	addr := startTCPEcho(t)
	ms := int64(time.Millisecond)
	sched := &Schedule{
		Types:    []Type{{Name: "ANY", MeanServiceNs: 1}},
		Requests: []Request{{At: 0, ServiceNs: uint32(300 * ms)}, {At: 20 * ms, ServiceNs: 0}, {At: 60 * ms, ServiceNs: 0}, {At: 100 * ms, ServiceNs: 0}},
		Rate:     40, Duration: 120 * time.Millisecond,
	}
	for _, tc := range []struct {
		pick  connpick.Policy
		conns []int // of the requests
		held  bool  // requests 2 waited for request 0
	}{
		{connpick.Pool, []int{0, 1, 1, 1}, false},
		{connpick.RoundRobin, []int{0, 1, 0, 1}, true},
	} {
		res, err := Run(context.Background(), Spec{Server: TCPScheme + addr, Conns: 2, ConnPick: tc.pick, Warmup: -1, MaxLag: time.Second, Grace: 5 * time.Second}, sched)
		if err != nil {
			t.Fatal(err)
		}
		if res.Answered != 4 || res.BadReplies != 0 {
			t.Fatalf("%s: answered %d, bad replies %d, want 4 and 0", tc.pick, res.Answered, res.BadReplies)
		}
		for i, want := range tc.conns {
			if got := res.Conn(i); got != want {
				t.Errorf("%s: request %d on connection %d, want %d", tc.pick, i, got, want)
			}
		}
		var lat int64
		for _, s := range res.AppendSamples(nil, -1) {
			if s.ID == 2 {
				lat = s.LatencyNs
			}
		}
		// Request 2, sent 60 ms in, is answered after request 0's
		// 300 ms only when it is queued behind it.
		if held := lat > 200*ms; held != tc.held {
			t.Errorf("%s: request 2's latency %v, held behind request 0: %v, want %v", tc.pick, time.Duration(lat), held, tc.held)
		}
	}
}

// TestMemcachedOverTCP plays the memcached workload over TCP against
// memcached itself: gets, multi-gets and sets parsed from the stream.
func TestMemcachedOverTCP(t *testing.T) {
	addr := memcachedtest.StartMemcached(t, false)
	sched, err := NewSchedule(memcachedWorkload(t), 3000, 300*time.Millisecond, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := PreloadMemcached(context.Background(), TCPScheme+addr, 200, 100); err != nil {
		t.Fatal(err)
	}
	spec := Spec{Server: TCPScheme + addr, Format: FormatMemcached, Conns: 5, MemcachedKeys: 200, MultiGetKeys: 10, ValueSize: 100, MaxLag: time.Second, Grace: 10 * time.Second}
	res, err := Run(context.Background(), spec, sched)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(sched.Requests))
	if res.Answered != n || res.Lost != 0 || res.BadReplies != 0 || res.ErrorReplies != 0 {
		t.Fatalf("answered %d of %d, lost %d, bad %d, errors %d", res.Answered, n, res.Lost, res.BadReplies, res.ErrorReplies)
	}
}
