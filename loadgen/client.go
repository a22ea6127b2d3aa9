package loadgen

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/persephone-go/psp/internal/connpick"
	"github.com/persephone-go/psp/internal/sockstat"
	"github.com/persephone-go/psp/wire"
	"golang.org/x/net/ipv4"
)

// Errors returned by the load generator.
var (
	// ErrBadSpec is wrapped by errors about an invalid Spec or argument.
	ErrBadSpec = errors.New("loadgen: invalid spec")
	// ErrEmptySchedule is returned by Run for a schedule without requests.
	ErrEmptySchedule = errors.New("loadgen: empty schedule (raise the rate or the duration)")
)

// Request formats (Spec.Format).
const (
	// FormatPSP is the 16-byte psp header (package wire) carrying the
	// request's type and nominal service time.
	FormatPSP = "psp"
	// FormatKV is the kv application's request: a psp header (type GET or
	// SCAN, count 0, service time 0) followed by a key "k%05d". Slowdowns
	// are computed against the workload's sampled (nominal) service times.
	FormatKV = "kv"
)

// kvKeyLen is the length of the kv application's preloaded keys ("k00042").
const kvKeyLen = 6

// KVStatusOverloaded is the kv application's reply status (offset 8) for a
// request the server shed without serving it (app/kv.StatusOverloaded).
const KVStatusOverloaded = 3

// Defaults applied by Run to a Spec's zero fields.
const (
	DefaultServer     = "127.0.0.1:6789"
	DefaultWarmup     = 0.1
	DefaultMaxLag     = time.Millisecond
	DefaultSpinWindow = 100 * time.Microsecond
	DefaultBatch      = 32
	minGrace          = 100 * time.Millisecond
)

// Spec configures a run. Its zero value is usable: every zero field takes
// the default documented on it.
type Spec struct {
	// Server is the server's address: host:port over UDP (default
	// 127.0.0.1:6789), tcp://host:port over TCP (Conns connections).
	Server string
	// Conns is the number of TCP connections a run over TCP opens
	// (default DefaultConns); ConnPick chooses each request's.
	Conns int
	// ConnPick is how a run over TCP chooses a request's connection
	// (default connpick.Pool): an idle one, else the one with the fewest
	// requests in flight, as client libraries' connection pools do; or
	// connpick.RoundRobin, request i on connection i mod Conns, pipelined
	// behind whatever is in flight there.
	ConnPick connpick.Policy
	// Dilation is the server's time dilation factor (emulate application):
	// slowdowns are computed against service time × Dilation. Zero means 1.
	Dilation float64
	// Warmup is the fraction of the earliest requests excluded from the
	// latency statistics. Zero means 0.1; a negative value keeps every
	// request.
	Warmup float64
	// Grace is how long after the end of the schedule replies still count
	// as in time; replies after it (waited for during another Grace) are
	// late. Zero means 20 × the longest mean service time × Dilation, at
	// least 100 ms. Run returns as soon as every request is answered.
	Grace time.Duration
	// MaxLag is the sender's tolerated 99th-percentile lag behind its
	// schedule; above it the run is not sustained. Zero means 1 ms.
	MaxLag time.Duration
	// SpinWindow is how close to a send time the sender stops sleeping and
	// spins, without yielding the processor, so that the send leaves on
	// time (a sleep wakes tens of microseconds late on some machines). Zero
	// means 100 µs; negative means always sleep. On a machine whose cores
	// the server under test shares, the spin takes CPU from it.
	SpinWindow time.Duration
	// Batch is the most requests sent in one system call when several are
	// due (default 32).
	Batch int
	// Format is the request format: FormatPSP (default: the 16-byte psp
	// header carrying the service time) or FormatKV (the kv application's
	// GET/SCAN requests; see KVKeys).
	Format string
	// KVKeys is the number of keys the kv server preloaded (default 5000):
	// GET requests read a key drawn from the request id among them, SCAN
	// requests scan from the first key.
	KVKeys int
	// MemcachedKeys is the memcached format's key space, "k0" to
	// "k<MemcachedKeys-1>" (default 10000; see PreloadMemcached).
	MemcachedKeys int
	// MultiGetKeys is the number of keys of a memcached MULTIGET (default
	// 100).
	MultiGetKeys int
	// ValueSize is the size of a memcached or redis SET's value (default
	// 64).
	ValueSize int
	// RedisKeys is the redis format's key space, "key:0" to
	// "key:<RedisKeys-1>" (default DefaultRedisKeys; see PreloadRedis).
	RedisKeys int
	// FromActualSend measures latencies from the time each request was
	// actually sent instead of its intended send time. The sender never
	// waits for the server, so its lag is the client's own scheduling delay
	// (an overloaded machine); excluding it judges the server alone. The
	// default, measuring from the intended time, is the honest end-to-end
	// figure.
	FromActualSend bool
	// Progress, when set, is called about every 200 ms from a goroutine of
	// Run's with the number of requests sent and answered so far.
	Progress func(sent, answered int)
}

// withDefaults returns s with zero fields set to their defaults (a
// negative Warmup to zero) for a run of sched.
func (s Spec) withDefaults(sched *Schedule) Spec {
	if s.Server == "" {
		s.Server = DefaultServer
	}
	if s.Dilation == 0 {
		s.Dilation = 1
	}
	switch {
	case s.Warmup == 0:
		s.Warmup = DefaultWarmup
	case s.Warmup < 0:
		s.Warmup = 0
	}
	if s.Grace == 0 {
		longest := 0.0
		for _, t := range sched.Types {
			longest = max(longest, t.MeanServiceNs)
		}
		s.Grace = max(minGrace, time.Duration(20*longest*max(s.Dilation, 0)))
	}
	if s.MaxLag == 0 {
		s.MaxLag = DefaultMaxLag
	}
	if s.SpinWindow == 0 {
		s.SpinWindow = DefaultSpinWindow
	}
	if s.Batch == 0 {
		s.Batch = DefaultBatch
	}
	if s.Format == "" {
		s.Format = FormatPSP
	}
	if _, ok := tcpAddr(s.Server); ok && s.Conns == 0 {
		s.Conns = DefaultConns
	}
	if s.Format == FormatKV && s.KVKeys == 0 {
		s.KVKeys = 5000
	}
	if s.Format == FormatRedis {
		if s.RedisKeys == 0 {
			s.RedisKeys = DefaultRedisKeys
		}
		if s.ValueSize == 0 {
			s.ValueSize = DefaultValueSize
		}
	}
	if s.Format == FormatMemcached {
		if s.MemcachedKeys == 0 {
			s.MemcachedKeys = DefaultMemcachedKeys
		}
		if s.MultiGetKeys == 0 {
			s.MultiGetKeys = DefaultMultiGetKeys
		}
		if s.ValueSize == 0 {
			s.ValueSize = DefaultValueSize
		}
	}
	return s
}

// Validate reports the first problem with s (after defaults) for a run of
// sched, wrapping ErrBadSpec, as Run does: to refuse a spec before work
// that precedes the run (such as PreloadMemcached).
func (s Spec) Validate(sched *Schedule) error { return s.validate(sched) }

// MaxValueSize is the largest memcached value size (Spec.ValueSize) whose
// sets fit one UDP datagram with memcachedKeys keys (0: the default).
func MaxValueSize(memcachedKeys int) int {
	if memcachedKeys == 0 {
		memcachedKeys = DefaultMemcachedKeys
	}
	s := Spec{MemcachedKeys: memcachedKeys, MultiGetKeys: 2, ValueSize: 1}
	for over := memcachedRequestLen(s) - maxDatagram; over < 0; over = memcachedRequestLen(s) - maxDatagram {
		s.ValueSize -= over // the digits of the size may grow: check again
	}
	for memcachedRequestLen(s) > maxDatagram {
		s.ValueSize--
	}
	return s.ValueSize
}

// validate reports the first problem with s (after defaults) for a run of
// sched, wrapping ErrBadSpec.
func (s Spec) validate(sched *Schedule) error {
	s = s.withDefaults(sched)
	switch {
	case !(s.Dilation > 0) || math.IsInf(s.Dilation, 0):
		return fmt.Errorf("dilation %v: %w (want > 0)", s.Dilation, ErrBadSpec)
	case s.Warmup >= 1 || math.IsNaN(s.Warmup):
		return fmt.Errorf("warmup fraction %v: %w (want < 1)", s.Warmup, ErrBadSpec)
	case s.Grace < 0:
		return fmt.Errorf("grace %v: %w (want >= 0)", s.Grace, ErrBadSpec)
	case s.Batch < 0 || s.Batch > 1024:
		return fmt.Errorf("batch %d: %w (want 1..1024)", s.Batch, ErrBadSpec)
	case s.Conns < 0 || s.Conns > MaxConns:
		return fmt.Errorf("connections %d: %w (want 1..%d)", s.Conns, ErrBadSpec, MaxConns)
	}
	if _, err := connpick.Parse(string(s.ConnPick)); err != nil {
		return fmt.Errorf("%w: %w", ErrBadSpec, err)
	}
	if _, ok := tcpAddr(s.Server); ok {
		if _, err := streamFormatOf(s.Format); err != nil {
			return err
		}
	} else if _, err := udpAddr(s.Server); err != nil {
		return err
	}
	switch s.Format {
	case FormatPSP:
	case FormatKV:
		if s.KVKeys < 1 || s.KVKeys > 100_000 {
			return fmt.Errorf("kv keys %d: %w (want 1..100000: keys are k00000..k99999)", s.KVKeys, ErrBadSpec)
		}
		for _, t := range sched.Types {
			if t.WireID != wire.TypeGet && t.WireID != wire.TypeScan {
				return fmt.Errorf("type %s (id %d) in the kv format: %w (want GET %d or SCAN %d, e.g. the rocksdb workload)",
					t.Name, t.WireID, ErrBadSpec, wire.TypeGet, wire.TypeScan)
			}
		}
	case FormatMemcached:
		switch {
		case s.MemcachedKeys < 1 || s.MemcachedKeys > MaxMemcachedKeys:
			return fmt.Errorf("memcached keys %d: %w (want 1..%d)", s.MemcachedKeys, ErrBadSpec, MaxMemcachedKeys)
		case s.MultiGetKeys < 2 || s.MultiGetKeys > 1000:
			return fmt.Errorf("multi-get keys %d: %w (want 2..1000)", s.MultiGetKeys, ErrBadSpec)
		case s.ValueSize < 1 || memcachedRequestLen(s) > maxDatagram:
			return fmt.Errorf("value size %d: %w (want at least 1, and at most %d: a request must fit one UDP datagram of %d bytes)", s.ValueSize, ErrBadSpec, MaxValueSize(s.MemcachedKeys), maxDatagram)
		}
		if _, err := memcachedCommands(sched); err != nil {
			return err
		}
	case FormatRedis:
		if _, ok := tcpAddr(s.Server); !ok {
			return fmt.Errorf("format %s over UDP: %w (Redis's protocol runs over TCP: give the server as %sHOST:PORT)", FormatRedis, ErrBadSpec, TCPScheme)
		}
		switch {
		case s.RedisKeys < 1 || s.RedisKeys > MaxRedisKeys:
			return fmt.Errorf("redis keys %d: %w (want 1..%d)", s.RedisKeys, ErrBadSpec, MaxRedisKeys)
		case s.ValueSize < 1 || s.ValueSize > MaxRedisValueSize:
			return fmt.Errorf("value size %d: %w (want 1..%d)", s.ValueSize, ErrBadSpec, MaxRedisValueSize)
		}
		if _, err := redisCommands(sched); err != nil {
			return err
		}
	default:
		return fmt.Errorf("format %q: %w (want %s, %s, %s or %s)", s.Format, ErrBadSpec, FormatPSP, FormatKV, FormatMemcached, FormatRedis)
	}
	return nil
}

// maxDatagram is the longest request datagram the load generator sends.
const maxDatagram = 65507

// run is the state shared by a run's goroutines. recv is written by the
// receiver only and read after it has been joined.
type run struct {
	spec  Spec
	sched *Schedule
	conn  *net.UDPConn
	start time.Time

	recv     []int64 // recv[id]: reply time (ns since start), 0 = none yet
	sentAt   []int64 // sentAt[id]: actual send time (ns since start)
	sentOK   []bool  // sentOK[id]: the datagram left without error
	connOf   []int32 // over TCP, connOf[id]: the connection request id went on
	shed     []bool  // shed[id]: the reply said the server shed the request
	lag      lagRecorder
	sent     atomic.Int64 // requests handed to the socket (or failed)
	answered atomic.Int64

	sendErrors   uint64
	duplicates   uint64
	badReplies   uint64
	errorReplies uint64
	refused      uint64
	receiverErr  error
	sentUpTo     int   // requests the sender attempted
	senderEnd    int64 // ns since start when the sender finished

	mcCmds  []uint8 // memcached format: the command of each type
	mcValue []byte  // memcached format: a SET's value

	rdCmds  []redisCmd // redis format: the command of each type
	rdValue []byte     // redis format: a SET's value
}

// newRun preallocates a run's tables; the clock starts now.
func newRun(spec Spec, sched *Schedule, conn *net.UDPConn) *run {
	n := len(sched.Requests)
	r := &run{
		spec:   spec,
		sched:  sched,
		conn:   conn,
		recv:   make([]int64, n),
		sentAt: make([]int64, n),
		sentOK: make([]bool, n),
		shed:   make([]bool, n),
		lag:    newLagRecorder(),
		start:  time.Now(),
	}
	if spec.Format == FormatMemcached {
		r.mcCmds, _ = memcachedCommands(sched) // checked by validate
		r.mcValue = bytes.Repeat([]byte{'v'}, spec.ValueSize)
	}
	if spec.Format == FormatRedis {
		r.rdCmds, _ = redisCommands(sched) // checked by validate
		r.rdValue = bytes.Repeat([]byte{'v'}, spec.ValueSize)
	}
	return r
}

func (r *run) now() int64 { return int64(time.Since(r.start)) }

// Run plays sched against the server and returns the measured result. It
// stops sending when ctx is cancelled and then reports what was measured so
// far (Result.Interrupted). It returns an error only when the run could not
// be carried out (bad spec, socket errors).
func Run(ctx context.Context, spec Spec, sched *Schedule) (*Result, error) {
	if sched == nil || len(sched.Requests) == 0 {
		return nil, ErrEmptySchedule
	}
	if err := spec.validate(sched); err != nil {
		return nil, fmt.Errorf("loadgen: run: %w", err)
	}
	spec = spec.withDefaults(sched)
	if addr, ok := tcpAddr(spec.Server); ok {
		return runTCP(ctx, spec, sched, addr)
	}
	addr, err := udpAddr(spec.Server)
	if err != nil {
		return nil, fmt.Errorf("loadgen: run: %w", err)
	}
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("loadgen: resolve server %q: %w (want host:port, or tcp://host:port)", spec.Server, err)
	}
	conn, err := net.DialUDP("udp", nil, raddr)
	if err != nil {
		return nil, fmt.Errorf("loadgen: dial %s: %w", raddr, err)
	}
	// Large socket buffers absorb bursts of replies; best effort (the
	// kernel caps them at net.core.rmem_max).
	_ = conn.SetReadBuffer(4 << 20)
	_ = conn.SetWriteBuffer(4 << 20)
	enableRxStamps(conn)

	r := newRun(spec, sched, conn)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); r.receive() }()
	stopProgress := r.startProgress()

	interrupted := r.send(ctx)

	inTime, interrupted := r.awaitReplies(ctx, interrupted)
	var clientDrops sockstat.Drops
	drops, dropsKnown := uint64(0), false
	if raw, err := conn.SyscallConn(); err == nil {
		drops, dropsKnown = clientDrops.Read(raw)
	}
	_ = conn.Close()
	wg.Wait()
	stopProgress()
	if r.receiverErr != nil {
		return nil, fmt.Errorf("loadgen: receive from %s: %w", raddr, r.receiverErr)
	}
	res := r.result(inTime)
	res.ClientDrops, res.ClientDropsKnown = int64(drops), dropsKnown
	if interrupted {
		res.Interrupted, res.Sustained = true, false
	}
	return res, nil
}

// startProgress calls Spec.Progress about every 200 ms from a goroutine of
// its own, until the function it returns is called (once more then).
func (r *run) startProgress() (stop func()) {
	if r.spec.Progress == nil {
		return func() {}
	}
	stopCh := make(chan struct{})
	var done sync.WaitGroup
	done.Add(1)
	go func() {
		defer done.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopCh:
				r.spec.Progress(int(r.sent.Load()), int(r.answered.Load()))
				return
			case <-t.C:
				r.spec.Progress(int(r.sent.Load()), int(r.answered.Load()))
			}
		}
	}()
	return func() {
		close(stopCh)
		done.Wait()
	}
}

// awaitReplies waits for the replies once the sender is done: in time
// until the end of the schedule plus Grace, late until another Grace has
// passed, and no longer once every request sent is answered. It returns
// when replies stop counting as in time, and whether the run was
// interrupted.
func (r *run) awaitReplies(ctx context.Context, interrupted bool) (int64, bool) {
	end := max(r.sched.Duration.Nanoseconds(), r.senderEnd)
	inTime := end + r.spec.Grace.Nanoseconds()
	stopAt := inTime + r.spec.Grace.Nanoseconds()
	if interrupted {
		stopAt = min(stopAt, r.now()+r.spec.Grace.Nanoseconds())
	}
	expected := int64(0)
	for _, ok := range r.sentOK[:r.sentUpTo] {
		if ok {
			expected++
		}
	}
	for r.answered.Load() < expected && r.now() < stopAt {
		if ctx.Err() != nil && !interrupted {
			// Cancelled after the last send: stop waiting; what is
			// unanswered counts as lost.
			interrupted = true
			break
		}
		time.Sleep(time.Millisecond)
	}
	return inTime, interrupted
}

// untilDue waits for the send time at: it sleeps until spin before it,
// then spins without yielding so that the send leaves on time. It returns
// the time once at has come, or stop when done closes first.
func (r *run) untilDue(at, spin int64, done <-chan struct{}) (now int64, stop bool) {
	for {
		now = r.now()
		wait := at - now
		if wait <= 0 {
			return now, false
		}
		select {
		case <-done:
			return now, true
		default:
		}
		if wait > spin {
			sleepPrecise(time.Duration(wait - max(spin, 0)))
		}
	}
}

// send plays the schedule. It reports whether ctx stopped it early.
func (r *run) send(ctx context.Context) (interrupted bool) {
	pc := ipv4.NewPacketConn(r.conn)
	msgs := newBatch(r.spec.Batch, r.requestLen())
	return r.play(ctx, func(i int, now int64) int {
		k := r.fillBatch(msgs, i, now)
		r.sendBatch(pc, msgs[:k], i)
		return k
	})
}

// play waits for each request's time in the schedule and then calls
// sendDue(i, now), which sends requests from i on (those due at now, at
// most a batch) and returns how many. It reports whether ctx stopped it
// early.
func (r *run) play(ctx context.Context, sendDue func(i int, now int64) int) (interrupted bool) {
	reqs := r.sched.Requests
	spin := r.spec.SpinWindow.Nanoseconds()
	done := ctx.Done()
	i := 0
	defer func() {
		r.sentUpTo = i
		r.senderEnd = r.now()
	}()
	for i < len(reqs) {
		now, stop := r.untilDue(reqs[i].At, spin, done)
		if stop {
			return true
		}
		i += sendDue(i, now)
		r.sent.Store(int64(i))
	}
	return false
}

// requestLen is the longest request payload the run builds.
func (r *run) requestLen() int {
	if r.spec.Format == FormatMemcached {
		return memcachedRequestLen(r.spec)
	}
	return wire.HeaderLen + kvKeyLen // psp header, kv: header + key
}

// newBatch allocates n messages, each with one buffer of size bytes
// (fillBatch reslices it to the request's length).
func newBatch(n, size int) []ipv4.Message {
	bufs := make([]byte, n*size)
	msgs := make([]ipv4.Message, n)
	for i := range msgs {
		msgs[i].Buffers = [][]byte{bufs[i*size : (i+1)*size : (i+1)*size]}
	}
	return msgs
}

// fillBatch encodes the requests from first on that are due at now, at most
// len(msgs), into msgs, records their lag and returns how many it encoded.
func (r *run) fillBatch(msgs []ipv4.Message, first int, now int64) int {
	reqs := r.sched.Requests
	types := r.sched.Types
	k := 0
	for first+k < len(reqs) && k < len(msgs) && reqs[first+k].At <= now {
		q := &reqs[first+k]
		id := first + k
		b := msgs[k].Buffers[0]
		b = b[:cap(b)]
		if r.spec.Format == FormatMemcached {
			msgs[k].Buffers[0] = r.encodeMemcached(b, id, int(q.Type))
			r.lag.record(now - q.At)
			r.sentAt[id] = now
			k++
			continue
		}
		h := wire.Header{ID: uint32(id), Type: types[q.Type].WireID, ServiceNs: q.ServiceNs}
		n := wire.HeaderLen
		if r.spec.Format == FormatKV {
			h.ServiceNs = 0
			key := 0
			if h.Type == wire.TypeGet {
				key = int(mix64(uint64(id)) % uint64(r.spec.KVKeys))
			}
			putKVKey(b[wire.HeaderLen:], key)
			n += kvKeyLen
		}
		h.Encode(b)
		msgs[k].Buffers[0] = b[:n]
		r.lag.record(now - q.At)
		r.sentAt[first+k] = now
		k++
	}
	return k
}

// sendBatch writes msgs (requests first..first+len(msgs)-1), retrying the
// rest of the batch after a partial write and counting failures.
func (r *run) sendBatch(pc *ipv4.PacketConn, msgs []ipv4.Message, first int) {
	for off := 0; off < len(msgs); {
		n, err := pc.WriteBatch(msgs[off:], 0)
		for j := 0; j < n; j++ {
			r.sentOK[first+off+j] = true
		}
		off += n
		if err != nil {
			// The failed datagram is skipped: it counts as a send error
			// (and, never answered, as lost). ECONNREFUSED reports an
			// earlier datagram's ICMP error, not this one's, but the
			// kernel already consumed it: skipping one is the honest count.
			r.sendErrors++
			off++
		} else if n == 0 {
			r.sendErrors += uint64(len(msgs) - off)
			return
		}
	}
}

// putKVKey writes the kv application's key number i ("k" and five digits)
// into b.
func putKVKey(b []byte, i int) {
	_ = b[kvKeyLen-1]
	b[0] = 'k'
	for j := kvKeyLen - 1; j >= 1; j-- {
		b[j] = byte('0' + i%10)
		i /= 10
	}
}

// mix64 is SplitMix64's finaliser: a well-spread hash of a request id, so
// GET keys look random but a schedule always reads the same keys.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// receive records reply times until the socket is closed: the kernel's
// receive timestamp of each reply where the socket provides one (Linux),
// so that the time the receiver waited to run is not counted, else the
// time it read the reply.
func (r *run) receive() {
	var buf [2048]byte
	var oob [stampRoom]byte
	for {
		n, oobn, _, _, err := r.conn.ReadMsgUDPAddrPort(buf[:], oob[:])
		t := time.Now()
		now := int64(t.Sub(r.start))
		if stamp, ok := rxStamp(oob[:oobn]); ok && err == nil {
			if wall := t.UnixNano(); stamp <= wall {
				now -= wall - stamp
			}
		}
		if err != nil {
			switch {
			case errors.Is(err, net.ErrClosed):
				return
			case errors.Is(err, syscall.ECONNREFUSED):
				r.refused++
				continue
			}
			r.receiverErr = err
			return
		}
		r.handleReply(buf[:n], now)
	}
}

// handleReply matches one reply to its request and records its time.
func (r *run) handleReply(p []byte, now int64) {
	if r.spec.Format == FormatMemcached {
		r.handleMemcachedReply(p, now)
		return
	}
	if len(p) < wire.HeaderLen {
		r.badReplies++
		return
	}
	reqs := r.sched.Requests
	id := binary.LittleEndian.Uint32(p[0:])
	typ := binary.LittleEndian.Uint32(p[4:])
	// A reply timed before its request's intended send time answers no
	// request of this run (e.g. a stale reply to an earlier run that used
	// the same port): recording it would hide the real latency.
	if int64(id) >= int64(len(reqs)) || r.sched.Types[reqs[id].Type].WireID != typ || now < reqs[id].At {
		r.badReplies++
		return
	}
	if r.recv[id] != 0 {
		r.duplicates++
		return
	}
	if r.spec.Format == FormatKV {
		switch binary.LittleEndian.Uint32(p[8:]) {
		case 0:
		case KVStatusOverloaded:
			// The server shed the request unserved and said so: not an
			// answer, not lost either.
			r.shed[id] = true
		default:
			// The kv application answered with an error status (not
			// found, bad request): the request was served, but count it.
			r.errorReplies++
		}
	}
	r.recv[id] = max(now, 1)
	r.answered.Add(1)
}
