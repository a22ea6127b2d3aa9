package loadgen

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/persephone-go/psp/report"
)

// The lag histogram ranges from 1 ns to 1 hour, to 3 significant digits.
const (
	maxLatencyNs = int64(time.Hour)
	sigFigs      = 3
)

// lagRecorder records how far behind its schedule the sender sent each
// request. RecordValue allocates nothing.
type lagRecorder struct{ h *hdrhistogram.Histogram }

func newLagRecorder() lagRecorder {
	return lagRecorder{h: hdrhistogram.New(1, maxLatencyNs, sigFigs)}
}

func (l lagRecorder) record(ns int64) {
	_ = l.h.RecordValue(min(max(ns, 1), maxLatencyNs))
}

// Result is what a run measured.
type Result struct {
	Server   string
	Dilation float64
	// Rate is the schedule's target rate (requests/s).
	Rate     float64
	Duration time.Duration
	Grace    time.Duration

	Scheduled int64 // requests in the schedule
	Sent      int64 // requests the sender attempted (less than Scheduled if interrupted)
	// SendErrors counts datagrams the socket refused.
	SendErrors int64
	Answered   int64 // replies in time
	Late       int64 // replies after the end of the schedule + Grace
	Lost       int64 // requests sent and never answered
	// Duplicates and BadReplies count replies answering an already answered
	// request and replies that match no request (short, unknown id, wrong
	// type, received before the request was due).
	Duplicates, BadReplies int64
	// ErrorReplies counts kv replies carrying an error status and
	// memcached error lines (included in Answered).
	ErrorReplies int64
	// Overloaded counts requests the server answered "overloaded" (kv's
	// StatusOverloaded, memcached's "SERVER_ERROR out of memory ..."):
	// shed unserved. They are neither answered nor lost, and count as
	// dropped in the statistics.
	Overloaded int64
	// Refused counts ICMP port-unreachable errors seen by the receiver (no
	// server listening).
	Refused int64
	// ClientDrops counts replies the kernel dropped at the client's own
	// receive socket (its buffer was full: the client did not read fast
	// enough): lost outside the server. Zero where the kernel does not
	// say (ClientDropsKnown false).
	ClientDrops      int64
	ClientDropsKnown bool
	// Warmup is the number of earliest requests excluded from the statistics.
	Warmup int64
	// Conns is the number of connections of a run over TCP (whose
	// replies come back in their requests' order; Conn says which request
	// went on which); 0 over UDP.
	Conns int

	// OfferedRate is Sent / Duration, AchievedRate Answered / Duration
	// (requests/s).
	OfferedRate, AchievedRate float64
	// LagP99 and LagMax are how far behind its schedule the sender was.
	LagP99, LagMax time.Duration
	// SenderBehind reports LagP99 > Spec.MaxLag.
	SenderBehind bool
	// Sustained reports that AchievedRate >= 99.9% of OfferedRate, the
	// sender kept to its schedule and the run was not interrupted.
	Sustained bool
	// Interrupted reports that the run was cancelled before the end of its
	// schedule.
	Interrupted bool

	// Overall and Types are the statistics of the requests answered after
	// warm-up (late ones included): latency from the intended send time to
	// the reply, slowdown = latency / (service time × Dilation). Lost
	// counts requests never answered, warm-up included.
	Overall report.Stats
	Types   []report.TypeStats

	sched    *Schedule
	recv     []int64
	sentAt   []int64
	sentOK   []bool
	connOf   []int32
	shed     []bool
	inTime   int64
	warmIdx  int
	fromSend bool
}

// SustainedFraction is the share of the offered requests that must be
// answered in time for a run to count as sustained.
const SustainedFraction = 0.999

func (r *run) result(inTime int64) *Result {
	sched := r.sched
	n := len(sched.Requests)
	warm := int(float64(n) * r.spec.Warmup)
	res := &Result{
		Server:       r.spec.Server,
		Dilation:     r.spec.Dilation,
		Rate:         sched.Rate,
		Duration:     sched.Duration,
		Grace:        r.spec.Grace,
		Scheduled:    int64(n),
		Sent:         int64(r.sentUpTo),
		SendErrors:   int64(r.sendErrors),
		Duplicates:   int64(r.duplicates),
		BadReplies:   int64(r.badReplies),
		ErrorReplies: int64(r.errorReplies),
		Refused:      int64(r.refused),
		Warmup:       int64(warm),
		Conns:        r.tcpConns(),
		LagP99:       time.Duration(r.lag.h.ValueAtQuantile(99)),
		LagMax:       time.Duration(r.lag.h.Max()),
		sched:        sched,
		recv:         r.recv,
		sentAt:       r.sentAt,
		sentOK:       r.sentOK,
		connOf:       r.connOf,
		shed:         r.shed,
		inTime:       inTime,
		warmIdx:      warm,
		fromSend:     r.spec.FromActualSend,
	}
	names := make([]string, len(sched.Types))
	ids := make([]uint32, len(sched.Types))
	for i, t := range sched.Types {
		names[i], ids[i] = t.Name, t.WireID
	}
	rec := report.NewRecorder(names, ids)
	for id := 0; id < r.sentUpTo; id++ {
		q := &sched.Requests[id]
		got := r.recv[id]
		switch {
		case got == 0:
			rec.Lose(int(q.Type))
			res.Lost++
			continue
		case r.shed[id]:
			rec.Drop(int(q.Type))
			res.Overloaded++
			continue
		case got > inTime:
			res.Late++
		default:
			res.Answered++
		}
		if id >= warm {
			rec.Record(int(q.Type), res.latency(id), res.serviceNs(id))
		}
	}
	var p report.Point
	rec.Fill(&p)
	res.Overall, res.Types = p.Overall, p.Types
	secs := sched.Duration.Seconds()
	res.OfferedRate = float64(res.Sent) / secs
	res.AchievedRate = float64(res.Answered) / secs
	res.SenderBehind = res.LagP99 > r.spec.MaxLag
	res.Sustained = !res.SenderBehind && res.Sent == res.Scheduled &&
		float64(res.Answered) >= SustainedFraction*float64(res.Sent)
	return res
}

// latency is request id's latency as the statistics count it: from its
// intended (or, with Spec.FromActualSend, actual) send to its reply.
func (r *Result) latency(id int) int64 {
	from := r.sched.Requests[id].At
	if r.fromSend {
		from = r.sentAt[id]
	}
	return r.recv[id] - from
}

// serviceNs is request id's service time on the server's scale: nominal x
// Dilation.
func (r *Result) serviceNs(id int) int64 {
	return int64(float64(r.sched.Requests[id].ServiceNs) * r.Dilation)
}

// Sample is one measured request.
type Sample struct {
	ID        int   // index in the schedule
	LatencyNs int64 // as the statistics count it (see Result.Overall)
	ServiceNs int64 // nominal service time x Dilation
}

// AppendSamples appends to dst, in schedule order, the requests of type
// index typ (every type when typ < 0) that the statistics count: answered
// (in time or late) after the warm-up, not shed. Their latencies are the
// exact distribution behind Types[typ]'s quantiles.
func (r *Result) AppendSamples(dst []Sample, typ int) []Sample {
	for id := r.warmIdx; id < int(r.Sent) && id < len(r.recv); id++ {
		if r.recv[id] == 0 || r.shed[id] || (typ >= 0 && int(r.sched.Requests[id].Type) != typ) {
			continue
		}
		dst = append(dst, Sample{ID: id, LatencyNs: r.latency(id), ServiceNs: r.serviceNs(id)})
	}
	return dst
}

// Schedule returns the schedule the run played.
func (r *Result) Schedule() *Schedule { return r.sched }

// SentAt returns when request i of the schedule was actually sent (ns since
// the run's start) and whether it left without error.
func (r *Result) SentAt(i int) (int64, bool) {
	if i < 0 || i >= int(r.Sent) {
		return 0, false
	}
	return r.sentAt[i], r.sentOK[i]
}

// Conn returns the connection request i of the schedule went on, 0 to
// Conns-1 over TCP; 0 over UDP or for a request not sent.
func (r *Result) Conn(i int) int {
	if r.connOf == nil || i < 0 || i >= int(r.Sent) {
		return 0
	}
	return int(r.connOf[i])
}

// NotSustainedReason explains in a few words why a run is not sustained
// (every reason that applies, the most fundamental first), or returns ""
// for a sustained run.
func (r *Result) NotSustainedReason() string {
	if r.Sustained {
		return ""
	}
	var why []string
	if r.Interrupted {
		why = append(why, "interrupted")
	}
	switch {
	case r.Refused > 0 && r.Answered == 0:
		why = append(why, "no server listening (connection refused)")
	case float64(r.Answered) < SustainedFraction*float64(r.Sent) && r.Overloaded > 0:
		why = append(why, fmt.Sprintf("achieved %.1f%% of the offered rate (%d answered \"overloaded\", %d lost, %d late)",
			100*float64(r.Answered)/max(float64(r.Sent), 1), r.Overloaded, r.Lost, r.Late))
	case float64(r.Answered) < SustainedFraction*float64(r.Sent):
		why = append(why, fmt.Sprintf("achieved %.1f%% of the offered rate (%d lost, %d late)",
			100*float64(r.Answered)/max(float64(r.Sent), 1), r.Lost, r.Late))
	}
	if r.SenderBehind {
		why = append(why, fmt.Sprintf("sender behind schedule (p99 lag %v)", r.LagP99))
	}
	if len(why) == 0 {
		return "not sustained"
	}
	return strings.Join(why, "; ")
}

// WriteSamplesCSV writes one line per scheduled request: id, type name, wire
// type, nominal service time, intended and actual send times and reply time
// (ns since the start; empty when lost), latency from the intended send time
// (ns), slowdown and status (ok, late, lost, overloaded, unsent; warm-up requests are
// marked "warmup-ok" etc.).
func (r *Result) WriteSamplesCSV(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	bw.WriteString("id,type,wire_type,service_ns,intended_ns,sent_ns,received_ns,latency_ns,slowdown,status\n")
	var line []byte
	for id := range r.sched.Requests {
		q := &r.sched.Requests[id]
		t := r.sched.Types[q.Type]
		line = line[:0]
		line = strconv.AppendInt(line, int64(id), 10)
		line = append(line, ',')
		line = append(line, t.Name...)
		line = append(line, ',')
		line = strconv.AppendUint(line, uint64(t.WireID), 10)
		line = append(line, ',')
		line = strconv.AppendUint(line, uint64(q.ServiceNs), 10)
		line = append(line, ',')
		line = strconv.AppendInt(line, q.At, 10)
		line = append(line, ',')
		if int64(id) < r.Sent {
			line = strconv.AppendInt(line, r.sentAt[id], 10)
		}
		line = append(line, ',')
		got := r.recv[id]
		status := "ok"
		switch {
		case int64(id) >= r.Sent:
			status = "unsent"
		case got == 0:
			status = "lost"
		case r.shed[id]:
			status = "overloaded"
		case got > r.inTime:
			status = "late"
		}
		if got != 0 {
			l := got - q.At
			line = strconv.AppendInt(line, got, 10)
			line = append(line, ',')
			line = strconv.AppendInt(line, l, 10)
			line = append(line, ',')
			if q.ServiceNs > 0 {
				line = strconv.AppendFloat(line, float64(l)/(float64(q.ServiceNs)*r.Dilation), 'g', 6, 64)
			}
		} else {
			line = append(line, ",,"...)
		}
		line = append(line, ',')
		if id < r.warmIdx {
			line = append(line, "warmup-"...)
		}
		line = append(line, status...)
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			return fmt.Errorf("loadgen: write samples: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("loadgen: write samples: %w", err)
	}
	return nil
}

// PointSpec names what a Result was measured against, for Result.Point.
type PointSpec struct {
	Source   string // default "measured"
	Policy   string
	Workload string
	Workers  int
	// Load is the offered load the run was configured for (a fraction of the
	// workers' capacity).
	Load float64
	// MeanIdleWorkers is the server's mean number of idle workers, and
	// WastedWorkers the mean number idle while requests waited (the CPU
	// waste); NaN when unknown.
	MeanIdleWorkers, WastedWorkers float64
}

// Point returns the result as a report point, the format shared with the
// simulator and the plots.
func (r *Result) Point(ps PointSpec) report.Point {
	if ps.Source == "" {
		ps.Source = "measured"
	}
	return report.Point{
		Source:          ps.Source,
		Policy:          ps.Policy,
		Workload:        ps.Workload,
		Workers:         ps.Workers,
		Load:            ps.Load,
		OfferedRate:     r.OfferedRate,
		AchievedRate:    r.AchievedRate,
		Sustained:       r.Sustained,
		MeanIdleWorkers: ps.MeanIdleWorkers,
		WastedWorkers:   ps.WastedWorkers,
		DurationSec:     r.Duration.Seconds() * (1 - float64(r.Warmup)/max(float64(r.Scheduled), 1)),
		Overall:         r.Overall,
		Types:           append([]report.TypeStats(nil), r.Types...),
	}
}

// Timeline returns the run's per-type p99.9 latency and slowdown over time
// (report.Timeline) in buckets of the given width, requests counted in the
// bucket of their reply, warm-up included. Times are since the run's start;
// latencies are nominal (divided by the dilation) so that they compare
// with the workload's service times and with simulations; slowdowns are
// unchanged. Lost requests are left out.
func (r *Result) Timeline(bucket time.Duration) *report.Timeline {
	if bucket <= 0 {
		bucket = time.Second
	}
	names := make([]string, len(r.sched.Types))
	for i, t := range r.sched.Types {
		names[i] = t.Name
	}
	dil := r.Dilation
	if !(dil > 0) {
		dil = 1
	}
	ids := make([]int, 0, r.Answered+r.Late)
	for id := 0; id < int(r.Sent) && id < len(r.recv); id++ {
		if r.recv[id] != 0 {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b int) int { return cmp.Compare(r.recv[a], r.recv[b]) })
	tl := report.NewTimelineRecorder(names, int64(bucket))
	end := int64(r.Duration)
	for _, id := range ids {
		q := &r.sched.Requests[id]
		got := r.recv[id]
		tl.Record(int(q.Type), got, int64(float64(got-q.At)/dil), int64(q.ServiceNs))
		end = max(end, got)
	}
	return tl.Finish(end)
}
