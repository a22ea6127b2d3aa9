package loadgen

import (
	"context"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/wire"
	"github.com/persephone-go/psp/workload"
	"golang.org/x/net/ipv4"
)

// echoServer answers psp-header requests on UDP loopback after sleeping the
// header's service time × dilation (one goroutine per request: infinitely
// many workers), dropping every dropEvery-th request when dropEvery > 0.
type echoServer struct {
	conn      *net.UDPConn
	dilation  float64
	dropEvery int
	wg        sync.WaitGroup
}

func startEcho(t *testing.T, dilation float64, dropEvery int) *echoServer {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{conn: conn, dilation: dilation, dropEvery: dropEvery}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(func() {
		conn.Close()
		s.wg.Wait()
	})
	return s
}

func (s *echoServer) addr() string { return s.conn.LocalAddr().String() }

func (s *echoServer) serve() {
	defer s.wg.Done()
	buf := make([]byte, 2048)
	for n := 1; ; n++ {
		k, peer, err := s.conn.ReadFromUDP(buf)
		if err != nil {
			return
		}
		if s.dropEvery > 0 && n%s.dropEvery == 0 {
			continue
		}
		h, err := wire.Decode(buf[:k])
		if err != nil {
			continue
		}
		reply := make([]byte, wire.HeaderLen)
		h.Encode(reply)
		delay := time.Duration(float64(h.ServiceNs) * s.dilation)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			time.Sleep(delay)
			_, _ = s.conn.WriteToUDP(reply, peer)
		}()
	}
}

func highBimodal(t testing.TB) *workload.Workload {
	t.Helper()
	w, err := workload.Builtin("high-bimodal")
	if err != nil {
		t.Fatal(err)
	}
	return &w
}

func TestScheduleDeterministicAndPoisson(t *testing.T) {
	w := highBimodal(t)
	a, err := NewSchedule(w, 50_000, time.Second, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSchedule(w, 50_000, time.Second, 7)
	c, _ := NewSchedule(w, 50_000, time.Second, 8)
	if len(a.Requests) != len(b.Requests) {
		t.Fatalf("same seed, %d and %d requests", len(a.Requests), len(b.Requests))
	}
	for i := range a.Requests {
		if a.Requests[i] != b.Requests[i] {
			t.Fatalf("same seed, request %d differs: %+v vs %+v", i, a.Requests[i], b.Requests[i])
		}
	}
	if len(c.Requests) == len(a.Requests) && c.Requests[10] == a.Requests[10] {
		t.Errorf("different seeds gave the same schedule")
	}
	// 50,000 expected; Poisson sd ~224: allow 5 sd.
	if n := len(a.Requests); n < 48_900 || n > 51_100 {
		t.Errorf("%d requests in 1 s at 50k/s", n)
	}
	short := 0
	prev := int64(-1)
	for _, r := range a.Requests {
		if r.At < prev || r.At >= int64(time.Second) {
			t.Fatalf("send times not sorted within the duration: %d after %d", r.At, prev)
		}
		prev = r.At
		if a.Types[r.Type].Name == "SHORT" {
			short++
			if r.ServiceNs != 1000 {
				t.Fatalf("SHORT service %d ns", r.ServiceNs)
			}
		}
	}
	if f := float64(short) / float64(len(a.Requests)); f < 0.48 || f > 0.52 {
		t.Errorf("SHORT share %.3f, want ~0.5", f)
	}
}

func TestScheduleRejectsBadInput(t *testing.T) {
	w := highBimodal(t)
	for _, tc := range []struct {
		rate float64
		d    time.Duration
	}{{0, time.Second}, {-1, time.Second}, {1000, 0}, {1e12, time.Hour}} {
		if _, err := NewSchedule(w, tc.rate, tc.d, 1); err == nil {
			t.Errorf("rate %v duration %v: no error", tc.rate, tc.d)
		}
	}
}

func TestThenShiftsAndMergesTypes(t *testing.T) {
	w := highBimodal(t)
	a, _ := NewSchedule(w, 1000, 100*time.Millisecond, 1)
	swapped := *w
	swapped.Types = append([]workload.TypeSpec(nil), w.Types...)
	swapped.Types[0].Service, swapped.Types[1].Service = w.Types[1].Service, w.Types[0].Service
	b, _ := NewSchedule(&swapped, 1000, 100*time.Millisecond, 2)
	ab := a.Then(b)
	if len(ab.Types) != 2 {
		t.Fatalf("types not merged: %+v", ab.Types)
	}
	if len(ab.Requests) != len(a.Requests)+len(b.Requests) || ab.Duration != 200*time.Millisecond {
		t.Fatalf("%d requests over %v", len(ab.Requests), ab.Duration)
	}
	for _, r := range ab.Requests[len(a.Requests):] {
		if r.At < int64(100*time.Millisecond) {
			t.Fatalf("second phase not shifted: %d", r.At)
		}
		if ab.Types[r.Type].Name == "SHORT" && r.ServiceNs != 100_000 {
			t.Fatalf("second-phase SHORT has service %d, want the swapped 100µs", r.ServiceNs)
		}
	}
}

func TestRunAgainstEcho(t *testing.T) {
	srv := startEcho(t, 1, 0)
	w := highBimodal(t)
	sched, err := NewSchedule(w, 2000, 300*time.Millisecond, 1)
	if err != nil {
		t.Fatal(err)
	}
	progressCalls := 0
	res, err := Run(context.Background(), Spec{
		Server:   srv.addr(),
		Conns:    3,           // over UDP: no connections
		MaxLag:   time.Second, // shared test machines: sender lag is not what this test checks
		Progress: func(sent, answered int) { progressCalls++ },
	}, sched)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(sched.Requests))
	if res.Sent != n || res.Answered != n || res.Lost != 0 || res.Late != 0 || res.BadReplies != 0 || res.Duplicates != 0 {
		t.Fatalf("sent %d answered %d lost %d late %d bad %d dup %d of %d", res.Sent, res.Answered, res.Lost, res.Late, res.BadReplies, res.Duplicates, n)
	}
	if !res.Sustained {
		t.Errorf("not sustained: %s", res.NotSustainedReason())
	}
	if res.Conns != 0 {
		t.Errorf("a run over UDP reports %d connections", res.Conns)
	}
	if runtime.GOOS == "linux" && (!res.ClientDropsKnown || res.ClientDrops != 0) {
		t.Errorf("client socket drops %d (known %v), want 0 counted", res.ClientDrops, res.ClientDropsKnown)
	}
	if want := uint64(n - n/10); res.Overall.Count != want {
		t.Errorf("measured %d requests, want %d (10%% warm-up discarded)", res.Overall.Count, want)
	}
	var perType uint64
	for i, ts := range res.Types {
		perType += ts.Count
		if float64(ts.P50Latency) < sched.Types[i].MeanServiceNs {
			t.Errorf("%s: p50 latency %vns below its service time %vns", ts.Name, ts.P50Latency, sched.Types[i].MeanServiceNs)
		}
		if ts.P50Slowdown < 1 || ts.P999Slowdown < ts.P50Slowdown || float64(ts.MaxLatency)*1.002 < float64(ts.P999Latency) {
			t.Errorf("%s: quantiles out of order or slowdown below 1: %+v", ts.Name, ts.Stats)
		}
	}
	if perType != res.Overall.Count {
		t.Errorf("per-type counts sum to %d, overall %d", perType, res.Overall.Count)
	}
	if progressCalls == 0 {
		t.Errorf("progress callback never called")
	}
	var csv strings.Builder
	if err := res.WriteSamplesCSV(&csv); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(csv.String()), "\n")
	if len(lines) != int(n)+1 || !strings.HasSuffix(lines[len(lines)-1], ",ok") || !strings.HasSuffix(lines[1], ",warmup-ok") {
		t.Errorf("samples CSV: %d lines, first %q, last %q", len(lines), lines[1], lines[len(lines)-1])
	}
}

func TestRunCountsLostRequests(t *testing.T) {
	srv := startEcho(t, 1, 10)
	w := highBimodal(t)
	sched, _ := NewSchedule(w, 2000, 200*time.Millisecond, 3)
	res, err := Run(context.Background(), Spec{Server: srv.addr(), Grace: 50 * time.Millisecond, MaxLag: time.Second}, sched)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(sched.Requests))
	if res.Lost != n/10 || res.Answered+res.Late+res.Lost != n {
		t.Errorf("lost %d answered %d late %d of %d, want %d lost", res.Lost, res.Answered, res.Late, n, n/10)
	}
	if res.Sustained {
		t.Errorf("a run losing 10%% of its requests is marked sustained")
	}
	if !strings.Contains(res.NotSustainedReason(), "lost") {
		t.Errorf("reason %q does not mention the loss", res.NotSustainedReason())
	}
}

func TestRunWithoutServer(t *testing.T) {
	// A port nobody listens on: bind one and close it.
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	addr := c.LocalAddr().String()
	c.Close()
	sched, _ := NewSchedule(highBimodal(t), 1000, 50*time.Millisecond, 1)
	res, err := Run(context.Background(), Spec{Server: addr, Grace: 20 * time.Millisecond}, sched)
	if err != nil {
		t.Fatal(err)
	}
	if res.Answered != 0 || res.Lost+res.SendErrors < int64(len(sched.Requests)) || res.Sustained {
		t.Errorf("answered %d lost %d send errors %d sustained %v", res.Answered, res.Lost, res.SendErrors, res.Sustained)
	}
}

func TestRunInterrupted(t *testing.T) {
	srv := startEcho(t, 1, 0)
	sched, _ := NewSchedule(highBimodal(t), 1000, 10*time.Second, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := Run(ctx, Spec{Server: srv.addr()}, sched)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 3*time.Second || !res.Interrupted || res.Sustained || res.Sent >= res.Scheduled {
		t.Errorf("interrupted run: took %v, interrupted %v, sustained %v, sent %d of %d",
			time.Since(start), res.Interrupted, res.Sustained, res.Sent, res.Scheduled)
	}
}

func TestSpecValidation(t *testing.T) {
	sched, _ := NewSchedule(highBimodal(t), 1000, 10*time.Millisecond, 1)
	for _, spec := range []Spec{{Dilation: -1}, {Warmup: 1}, {Batch: -2}, {Server: "no-port"}} {
		if _, err := Run(context.Background(), spec, sched); err == nil {
			t.Errorf("%+v: no error", spec)
		}
	}
	if _, err := Run(context.Background(), Spec{}, &Schedule{}); err != ErrEmptySchedule {
		t.Errorf("empty schedule: %v", err)
	}
}

// newTestRun builds a run over sched with a connected socket to a sink.
func newTestRun(t testing.TB, sched *Schedule) (*run, *ipv4.PacketConn) {
	sink, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	_ = sink.SetReadBuffer(8 << 20)
	conn, err := net.DialUDP("udp", nil, sink.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	go func() { // drain the sink so that sends never block
		buf := make([]byte, 64)
		for {
			if _, err := sink.Read(buf); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { conn.Close(); sink.Close() })
	spec := Spec{}.withDefaults(sched)
	return newRun(spec, sched, conn), ipv4.NewPacketConn(conn)
}

func BenchmarkSendBatch(b *testing.B) {
	sched, _ := NewSchedule(highBimodal(b), 1e6, 10*time.Second, 1)
	r, pc := newTestRun(b, sched)
	msgs := newBatch(DefaultBatch, r.requestLen())
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i+DefaultBatch >= len(sched.Requests) {
			i = 0
		}
		k := r.fillBatch(msgs, i, sched.Requests[i+DefaultBatch-1].At)
		r.sendBatch(pc, msgs[:k], i)
		i += k
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*DefaultBatch), "ns/request")
}

func BenchmarkHandleReply(b *testing.B) {
	sched, _ := NewSchedule(highBimodal(b), 1e6, time.Second, 1)
	r, _ := newTestRun(b, sched)
	reply := make([]byte, wire.HeaderLen)
	b.ReportAllocs()
	j := 0
	for b.Loop() {
		if j == len(sched.Requests) {
			clear(r.recv)
			j = 0
		}
		q := sched.Requests[j]
		wire.Header{ID: uint32(j), Type: sched.Types[q.Type].WireID}.Encode(reply)
		r.handleReply(reply, q.At+5)
		j++
	}
}

// TestResultAccounting checks the statistics on hand-made reply tables:
// warm-up, late and lost requests, and the two latency origins.
func TestResultAccounting(t *testing.T) {
	sched, _ := NewSchedule(highBimodal(t), 1000, time.Second, 4)
	n := len(sched.Requests)
	for _, fromSend := range []bool{false, true} {
		spec := Spec{Dilation: 10, Grace: 100 * time.Millisecond, FromActualSend: fromSend}.withDefaults(sched)
		r := newRun(spec, sched, nil)
		r.sentUpTo = n
		const lag, svc = int64(3 * time.Millisecond), int64(time.Millisecond)
		inTime := sched.Duration.Nanoseconds() + spec.Grace.Nanoseconds()
		for id, q := range sched.Requests {
			r.sentOK[id] = true
			r.sentAt[id] = q.At + lag
			switch {
			case id%100 == 7: // lost
			case id%100 == 9: // late
				r.recv[id] = inTime + 1
			default:
				r.recv[id] = q.At + lag + svc
			}
		}
		res := r.result(inTime)
		lost, late := int64(0), int64(0)
		for id := range sched.Requests {
			switch id % 100 {
			case 7:
				lost++
			case 9:
				late++
			}
		}
		if res.Lost != lost || res.Late != late || res.Answered != int64(n)-lost-late {
			t.Fatalf("lost %d late %d answered %d, want %d, %d, %d", res.Lost, res.Late, res.Answered, lost, late, int64(n)-lost-late)
		}
		if res.Sustained || res.Warmup != int64(n/10) {
			t.Errorf("sustained %v with %d lost; warm-up %d", res.Sustained, lost, res.Warmup)
		}
		want := float64(lag + svc)
		if fromSend {
			want = float64(svc)
		}
		if p := float64(res.Overall.P50Latency); p < want*0.99 || p > want*1.01 {
			t.Errorf("fromSend=%v: p50 latency %v, want %v", fromSend, p, want)
		}
		// Slowdown against service time x dilation: the SHORT type's is
		// latency / (1µs x 10).
		for ti, ts := range res.Types {
			if ts.Name == "SHORT" {
				if s := ts.P50Slowdown; s < want/1e4*0.99 || s > want/1e4*1.01 {
					t.Errorf("fromSend=%v: SHORT p50 slowdown %v, want %v", fromSend, s, want/1e4)
				}
			}
			// The samples are the requests the statistics count: late ones
			// in, lost and warm-up ones out.
			samples := res.AppendSamples(nil, ti)
			if uint64(len(samples)) != ts.Count || ts.Count == 0 {
				t.Fatalf("fromSend=%v %s: %d samples, statistics count %d", fromSend, ts.Name, len(samples), ts.Count)
			}
			late := 0
			for _, s := range samples {
				q := &sched.Requests[s.ID]
				switch {
				case s.ID < n/10 || s.ID%100 == 7 || int(q.Type) != ti:
					t.Fatalf("fromSend=%v: sample %+v is a warm-up, lost or other type's request", fromSend, s)
				case s.ServiceNs != int64(float64(q.ServiceNs)*10):
					t.Fatalf("fromSend=%v: sample %+v, service %d x 10", fromSend, s, q.ServiceNs)
				case s.ID%100 == 9:
					late++
				case float64(s.LatencyNs) != want:
					t.Fatalf("fromSend=%v: sample %+v, latency want %v", fromSend, s, want)
				}
			}
			if late == 0 {
				t.Errorf("fromSend=%v %s: no late request among the samples", fromSend, ts.Name)
			}
		}
		if all := res.AppendSamples(nil, -1); uint64(len(all)) != res.Overall.Count {
			t.Errorf("fromSend=%v: %d samples of every type, statistics count %d", fromSend, len(all), res.Overall.Count)
		}
	}
}

// BenchmarkSendOneByOne is the baseline of BenchmarkSendBatch: one write(2)
// per request instead of one sendmmsg(2) per batch.
func BenchmarkSendOneByOne(b *testing.B) {
	sched, _ := NewSchedule(highBimodal(b), 1e6, 10*time.Second, 1)
	r, _ := newTestRun(b, sched)
	buf := make([]byte, wire.HeaderLen)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		for k := 0; k < DefaultBatch; k++ {
			if i == len(sched.Requests) {
				i = 0
			}
			q := sched.Requests[i]
			wire.Header{ID: uint32(i), Type: sched.Types[q.Type].WireID, ServiceNs: q.ServiceNs}.Encode(buf)
			if _, err := r.conn.Write(buf); err != nil {
				b.Fatal(err)
			}
			i++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*DefaultBatch), "ns/request")
}

func TestKVFormat(t *testing.T) {
	w, err := workload.Builtin("rocksdb")
	if err != nil {
		t.Fatal(err)
	}
	sched, _ := NewSchedule(&w, 2000, 200*time.Millisecond, 1)
	if _, err := Run(context.Background(), Spec{Format: FormatKV}, mustSchedule(t, highBimodal(t))); err == nil {
		t.Errorf("kv format accepted a workload without GET/SCAN types")
	}
	// A kv stand-in: checks the request shape, answers with the header
	// (status 0) and counts GET keys.
	keys := map[string]int{}
	bad := 0
	addr, stop := testenv.UDPServer(t, func(req []byte) []byte {
		h, _ := wire.Decode(req)
		key := string(req[wire.HeaderLen:])
		switch {
		case len(req) != wire.HeaderLen+6 || h.ServiceNs != 0 || key[0] != 'k':
			bad++
		case h.Type == wire.TypeScan && key != "k00000":
			bad++
		case h.Type == wire.TypeGet:
			keys[key]++
		}
		return req[:wire.HeaderLen]
	})
	res, err := Run(context.Background(), Spec{Server: addr, Format: FormatKV, KVKeys: 50, MaxLag: time.Second}, sched)
	stop()
	if err != nil {
		t.Fatal(err)
	}
	if res.Answered != int64(len(sched.Requests)) || bad != 0 || res.ErrorReplies != 0 {
		t.Errorf("answered %d of %d, %d malformed requests, %d error replies", res.Answered, len(sched.Requests), bad, res.ErrorReplies)
	}
	if len(keys) < 40 || len(keys) > 50 {
		t.Errorf("GETs read %d distinct keys of 50", len(keys))
	}
	for k := range keys {
		if k < "k00000" || k > "k00049" {
			t.Errorf("GET key %q outside k00000..k00049", k)
		}
	}
}

func mustSchedule(t *testing.T, w *workload.Workload) *Schedule {
	t.Helper()
	s, err := NewSchedule(w, 1000, 10*time.Millisecond, 1)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A kv server that sheds every third request with StatusOverloaded: those
// count as Overloaded (dropped in the statistics), neither answered nor
// lost, and the run is not sustained.
func TestKVOverloadedReplies(t *testing.T) {
	w, err := workload.Builtin("rocksdb")
	if err != nil {
		t.Fatal(err)
	}
	sched, _ := NewSchedule(&w, 2000, 150*time.Millisecond, 3)
	shed := 0
	addr, stop := testenv.UDPServer(t, func(req []byte) []byte {
		h, _ := wire.Decode(req)
		if h.ID%3 == 0 {
			h.Reserved = KVStatusOverloaded
			shed++
		}
		h.Encode(req)
		return req[:wire.HeaderLen]
	})
	res, err := Run(context.Background(), Spec{Server: addr, Format: FormatKV, MaxLag: time.Second, Warmup: -1}, sched)
	stop()
	if err != nil {
		t.Fatal(err)
	}
	if res.Overloaded != int64(shed) || res.Answered+res.Overloaded != int64(len(sched.Requests)) || res.Lost != 0 || res.Sustained {
		t.Errorf("overloaded %d (server shed %d), answered %d, lost %d of %d, sustained %v", res.Overloaded, shed, res.Answered, res.Lost, len(sched.Requests), res.Sustained)
	}
	if res.Overall.Dropped != uint64(shed) || !strings.Contains(res.NotSustainedReason(), "overloaded") {
		t.Errorf("dropped %d in the statistics, reason %q", res.Overall.Dropped, res.NotSustainedReason())
	}
}
