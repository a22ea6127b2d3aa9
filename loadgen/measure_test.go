package loadgen

import (
	"context"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/wire"
)

// TestRunStalledServerNoCoordinatedOmission plays a schedule against an
// echo server that stops reading for 200 ms once the request scheduled at
// 200 ms arrives. Every request scheduled during the stall is answered only
// after it, so its latency from the intended send time must be at least the
// rest of the stall: a client measuring from anything later (or pacing
// itself on replies) would report small latencies.
func TestRunStalledServerNoCoordinatedOmission(t *testing.T) {
	const stall = 200 * time.Millisecond
	stallFrom := (200 * time.Millisecond).Nanoseconds()
	sched, err := NewSchedule(highBimodal(t), 2000, 600*time.Millisecond, 5)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadBuffer(4 << 20)
	trigger := make(chan int64, 1) // intended send time of the request that started the stall
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		stalled := false
		for {
			n, peer, err := conn.ReadFromUDP(buf)
			if err != nil {
				return
			}
			h, err := wire.Decode(buf[:n])
			if err != nil || int(h.ID) >= len(sched.Requests) {
				continue
			}
			_, _ = conn.WriteToUDP(buf[:wire.HeaderLen], peer)
			if at := sched.Requests[h.ID].At; !stalled && at >= stallFrom {
				stalled = true
				trigger <- at
				time.Sleep(stall)
			}
		}
	}()
	res, err := Run(context.Background(), Spec{Server: conn.LocalAddr().String(), Warmup: -1, MaxLag: time.Second}, sched)
	conn.Close()
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if res.Lost != 0 {
		t.Fatalf("%d lost", res.Lost)
	}
	var trig int64
	select {
	case trig = <-trigger:
	default:
		t.Fatal("the server never stalled")
	}
	// The stall ends no earlier than trig + stall (on any clock), so a
	// request scheduled at At in (trig, trig+stall) waits at least
	// trig + stall - At.
	stalled := 0
	for id, q := range sched.Requests {
		if q.At <= trig || q.At >= trig+stall.Nanoseconds() {
			continue
		}
		stalled++
		if lat, min := res.recv[id]-q.At, trig+stall.Nanoseconds()-q.At; lat < min {
			t.Fatalf("request %d scheduled %v into the stall: latency %v, want >= %v",
				id, time.Duration(q.At-trig), time.Duration(lat), time.Duration(min))
		}
	}
	if stalled < 200 {
		t.Fatalf("only %d requests scheduled during the stall", stalled)
	}
	// About a third of the requests wait out part of the stall, so the
	// tail shows it.
	if res.Overall.MaxLatency < int64(stall)*95/100 || res.Overall.P99Latency < int64(stall)*3/4 {
		t.Errorf("p99 %v max %v, want close to the %v stall",
			time.Duration(res.Overall.P99Latency), time.Duration(res.Overall.MaxLatency), stall)
	}
}

// TestScheduleExponentialGaps checks the schedule's inter-arrival times
// against the exponential distribution: their mean is 1/rate, and the share
// of gaps above x means is exp(-x). Bounds are several standard errors wide.
func TestScheduleExponentialGaps(t *testing.T) {
	const rate = 100_000
	sched, err := NewSchedule(highBimodal(t), rate, time.Second, 11)
	if err != nil {
		t.Fatal(err)
	}
	reqs := sched.Requests
	n := float64(len(reqs) - 1)
	mean := 1e9 / rate
	sum, sumSq := 0.0, 0.0
	above := map[float64]float64{0.1: 0, 0.5: 0, 1: 0, 2: 0, 4: 0}
	for i := 1; i < len(reqs); i++ {
		g := float64(reqs[i].At - reqs[i-1].At)
		sum += g
		sumSq += g * g
		for x := range above {
			if g > x*mean {
				above[x]++
			}
		}
	}
	m := sum / n
	if math.Abs(m-mean)/mean > 0.02 {
		t.Errorf("mean gap %.1f ns, want %.1f", m, mean)
	}
	// Exponential: standard deviation equals the mean.
	if cv := math.Sqrt(sumSq/n-m*m) / m; math.Abs(cv-1) > 0.03 {
		t.Errorf("coefficient of variation %.3f, want 1", cv)
	}
	for x, k := range above {
		want := math.Exp(-x)
		if got := k / n; math.Abs(got-want) > 0.01 {
			t.Errorf("share of gaps above %g means: %.4f, want %.4f", x, got, want)
		}
	}
}

// TestWarmupBySchedule checks that the warm-up discards the earliest
// requests by intended send time, even when they complete last.
func TestWarmupBySchedule(t *testing.T) {
	sched, _ := NewSchedule(highBimodal(t), 1000, time.Second, 4)
	n := len(sched.Requests)
	spec := Spec{Grace: time.Hour}.withDefaults(sched)
	r := newRun(spec, sched, nil)
	r.sentUpTo = n
	warm := n / 10
	for id, q := range sched.Requests {
		r.sentOK[id], r.sentAt[id] = true, q.At
		r.recv[id] = q.At + int64(time.Millisecond)
		if id < warm {
			r.recv[id] = q.At + int64(10*time.Second) // completes after everything else
		}
	}
	res := r.result(int64(time.Hour))
	if res.Overall.Count != uint64(n-warm) || res.Overall.MaxLatency != int64(time.Millisecond) {
		t.Errorf("count %d (want %d), max latency %v (want 1ms): warm-up not by schedule",
			res.Overall.Count, n-warm, time.Duration(res.Overall.MaxLatency))
	}
}

// TestReplyBeforeIntendedSendIsBad: a datagram naming a request that is not
// due yet cannot be its reply (e.g. a stale reply from an earlier run that
// used the same port); accepting it would record a zero latency and then
// count the real reply as a duplicate.
func TestReplyBeforeIntendedSendIsBad(t *testing.T) {
	sched, _ := NewSchedule(highBimodal(t), 1000, time.Second, 4)
	r, _ := newTestRun(t, sched)
	id := len(sched.Requests) - 1
	q := sched.Requests[id]
	reply := make([]byte, wire.HeaderLen)
	wire.Header{ID: uint32(id), Type: sched.Types[q.Type].WireID}.Encode(reply)
	r.handleReply(reply, q.At-1)
	if r.recv[id] != 0 || r.badReplies != 1 {
		t.Fatalf("reply before the intended send time accepted (recv %d, bad %d)", r.recv[id], r.badReplies)
	}
	r.handleReply(reply, q.At+1000)
	if r.recv[id] != q.At+1000 || r.duplicates != 0 {
		t.Fatalf("the real reply: recv %d, duplicates %d", r.recv[id], r.duplicates)
	}
}

// TestNotSustainedReasonNamesTheCause: with no server listening the reason
// says so, even when the sender also lagged (a short run's start-up).
func TestNotSustainedReasonNamesTheCause(t *testing.T) {
	r := &Result{Sent: 23, Lost: 23, Refused: 23, SenderBehind: true, LagP99: 2 * time.Millisecond}
	if why := r.NotSustainedReason(); !strings.Contains(why, "no server listening") || !strings.Contains(why, "sender behind") {
		t.Errorf("reason %q", why)
	}
	r = &Result{Sent: 1000, Answered: 900, Lost: 100, SenderBehind: true, LagP99: 2 * time.Millisecond}
	if why := r.NotSustainedReason(); !strings.Contains(why, "100 lost") || !strings.Contains(why, "sender behind") {
		t.Errorf("reason %q", why)
	}
}
