package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/persephone-go/psp/internal/connpick"
	"github.com/persephone-go/psp/wire"
)

// TCP: with Spec.Server "tcp://host:port" a run opens Spec.Conns
// connections and sends each request on the connection Spec.ConnPick
// chooses (package connpick): by default an idle one, else the one with
// the fewest requests in flight, as client libraries' pools do; or
// round robin. Open loop as over UDP: a request leaves at its time
// whether or not the earlier ones on its connection were answered (they
// are then pipelined). A connection's replies come back in its requests'
// order, so each reader goroutine knows which request a reply answers:
// the oldest one sent on its connection and not yet answered. A reply's
// time is when its reader parsed it.

// TCPScheme prefixes Spec.Server for a run over TCP; UDPScheme (or none)
// for one over UDP.
const (
	TCPScheme = "tcp://"
	UDPScheme = "udp://"
)

// DefaultConns is Spec.Conns's default over TCP.
const DefaultConns = 20

// MaxConns bounds Spec.Conns.
const MaxConns = 10000

// tcpAddr returns the TCP address of a "tcp://host:port" server.
func tcpAddr(server string) (string, bool) {
	return strings.CutPrefix(server, TCPScheme)
}

// tcpConns returns the run's connections: Spec.Conns over TCP, 0 over
// UDP.
func (r *run) tcpConns() int {
	if _, ok := tcpAddr(r.spec.Server); ok {
		return r.spec.Conns
	}
	return 0
}

// udpAddr returns the UDP address of a "host:port" or "udp://host:port"
// server, or an error for any other scheme.
func udpAddr(server string) (string, error) {
	if a, ok := strings.CutPrefix(server, UDPScheme); ok {
		return a, nil
	}
	if scheme, _, ok := strings.Cut(server, "://"); ok {
		return "", fmt.Errorf("server %q: %w (want host:port, udp://host:port or tcp://host:port, not %s://)", server, ErrBadSpec, scheme)
	}
	return server, nil
}

// Outcomes of a reply read from a stream.
const (
	replyAnswer     = iota // served
	replyError             // served, with an error reply
	replyOverloaded        // shed by the server, and said so
)

// streamFormat is a request format over TCP.
type streamFormat interface {
	// encode appends request id's bytes to b.
	encode(r *run, b []byte, id int) []byte
	// reply reads the reply to request id from rd; an error ends the
	// connection's run (a reply it cannot parse, the connection gone).
	reply(r *run, rd *bufio.Reader, id int) (int, error)
}

// streamFormatOf returns the format's stream encoding.
func streamFormatOf(format string) (streamFormat, error) {
	switch format {
	case FormatPSP:
		return pspStream{}, nil
	case FormatMemcached:
		return memcachedStream{}, nil
	case FormatRedis:
		return redisStream{}, nil
	}
	return nil, fmt.Errorf("format %q over TCP: %w (want %s, %s or %s)", format, ErrBadSpec, FormatPSP, FormatMemcached, FormatRedis)
}

// pspStream: the 16-byte psp header each way.
type pspStream struct{}

func (pspStream) encode(r *run, b []byte, id int) []byte {
	q := &r.sched.Requests[id]
	var h [wire.HeaderLen]byte
	wire.Header{ID: uint32(id), Type: r.sched.Types[q.Type].WireID, ServiceNs: q.ServiceNs}.Encode(h[:])
	return append(b, h[:]...)
}

func (pspStream) reply(r *run, rd *bufio.Reader, id int) (int, error) {
	var h [wire.HeaderLen]byte
	if _, err := io.ReadFull(rd, h[:]); err != nil {
		return 0, err
	}
	if got := binary.LittleEndian.Uint32(h[:]); got != uint32(id) {
		return 0, fmt.Errorf("reply for request %d where %d was due", got, id)
	}
	return replyAnswer, nil
}

// memcachedStream: memcached's text protocol, without the UDP frame
// header.
type memcachedStream struct{}

func (memcachedStream) encode(r *run, b []byte, id int) []byte {
	return r.memcachedCommand(b, id, int(r.sched.Requests[id].Type))
}

func (memcachedStream) reply(r *run, rd *bufio.Reader, id int) (int, error) {
	get := r.mcCmds[r.sched.Requests[id].Type] != mcSet
	for {
		line, err := rd.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		for _, o := range mcOutOfMemory {
			if bytes.HasPrefix(line, o) {
				return replyOverloaded, nil
			}
		}
		for _, e := range mcErrors {
			if bytes.HasPrefix(line, e) {
				return replyError, nil
			}
		}
		if !get || bytes.Equal(line, mcEnd) {
			return replyAnswer, nil
		}
		if !bytes.HasPrefix(line, mcValue) {
			return 0, fmt.Errorf("memcached reply line %q", line)
		}
		// VALUE <key> <flags> <bytes> [<cas>]
		f := bytes.Fields(line)
		if len(f) < 4 {
			return 0, fmt.Errorf("memcached reply line %q", line)
		}
		n, err := strconv.Atoi(string(f[3]))
		if err != nil || n < 0 {
			return 0, fmt.Errorf("memcached reply line %q", line)
		}
		if _, err := rd.Discard(n + 2); err != nil {
			return 0, err
		}
	}
}

// tcpConn is one connection of a run.
type tcpConn struct {
	c   net.Conn
	out []byte // requests due, not yet written
	ids []int  // their ids
	// counters of the reader, added up after the run
	errorReplies, badReplies uint64
	err                      error
}

// tcpTurns chooses each request's connection and keeps, per connection,
// the requests sent on it and not yet answered, oldest first, linked
// through next: the sender adds to them, each connection's reader takes
// from them. It allocates nothing per request.
type tcpTurns struct {
	mu         sync.Mutex
	pick       *connpick.Picker
	head, tail []int32 // per connection; -1: none
	next       []int32 // per request: the next one sent on its connection
}

func newTCPTurns(p connpick.Policy, conns, requests int) (*tcpTurns, error) {
	pick, err := connpick.New(p, conns)
	if err != nil {
		return nil, err
	}
	t := &tcpTurns{pick: pick, head: make([]int32, conns), tail: make([]int32, conns), next: make([]int32, requests)}
	for c := range conns {
		t.head[c], t.tail[c] = -1, -1
	}
	return t, nil
}

// send chooses request id's connection and queues id on it.
func (t *tcpTurns) send(id int) int {
	t.mu.Lock()
	c := t.pick.Pick()
	t.next[id] = -1
	if t.tail[c] >= 0 {
		t.next[t.tail[c]] = int32(id)
	} else {
		t.head[c] = int32(id)
	}
	t.tail[c] = int32(id)
	t.mu.Unlock()
	return c
}

// oldest takes connection c's oldest request not yet answered, the one
// its next reply answers; false if none was sent.
func (t *tcpTurns) oldest(c int) (int, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := t.head[c]
	if id < 0 {
		return 0, false
	}
	t.head[c] = t.next[id]
	if t.head[c] < 0 {
		t.tail[c] = -1
	}
	return int(id), true
}

// answered counts a request of connection c answered, freeing its place.
func (t *tcpTurns) answered(c int) {
	t.mu.Lock()
	t.pick.Done(c)
	t.mu.Unlock()
}

// runTCP is Run over TCP.
func runTCP(ctx context.Context, spec Spec, sched *Schedule, addr string) (*Result, error) {
	format, err := streamFormatOf(spec.Format)
	if err != nil {
		return nil, fmt.Errorf("loadgen: run: %w", err)
	}
	turns, err := newTCPTurns(spec.ConnPick, spec.Conns, len(sched.Requests))
	if err != nil {
		return nil, fmt.Errorf("loadgen: run: %w", err)
	}
	conns := make([]*tcpConn, spec.Conns)
	d := net.Dialer{Timeout: 5 * time.Second}
	for i := range conns {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			for _, tc := range conns[:i] {
				tc.c.Close()
			}
			return nil, fmt.Errorf("loadgen: dial %s (connection %d of %d): %w", addr, i+1, spec.Conns, err)
		}
		conns[i] = &tcpConn{c: c}
	}
	r := newRun(spec, sched, nil)
	r.connOf = make([]int32, len(sched.Requests))
	var wg sync.WaitGroup
	for k, tc := range conns {
		wg.Add(1)
		go func() { defer wg.Done(); r.receiveTCP(tc, k, turns, format) }()
	}
	stopProgress := r.startProgress()

	interrupted := r.sendTCP(ctx, conns, turns, format)

	inTime, interrupted := r.awaitReplies(ctx, interrupted)
	for _, tc := range conns {
		tc.c.Close()
	}
	wg.Wait()
	stopProgress()
	for _, tc := range conns {
		r.errorReplies += tc.errorReplies
		r.badReplies += tc.badReplies
	}
	res := r.result(inTime)
	if interrupted {
		res.Interrupted, res.Sustained = true, false
	}
	return res, nil
}

// sendTCP plays the schedule over conns. It reports whether ctx stopped it
// early.
func (r *run) sendTCP(ctx context.Context, conns []*tcpConn, turns *tcpTurns, format streamFormat) (interrupted bool) {
	reqs := r.sched.Requests
	return r.play(ctx, func(i int, now int64) int {
		// Every request due now, at most a batch, each on its
		// connection; then one write per connection.
		k := 0
		for ; k < r.spec.Batch && i+k < len(reqs) && reqs[i+k].At <= now; k++ {
			id := i + k
			c := turns.send(id)
			r.connOf[id] = int32(c)
			tc := conns[c]
			tc.out = format.encode(r, tc.out, id)
			tc.ids = append(tc.ids, id)
			r.lag.record(now - reqs[id].At)
			r.sentAt[id] = now
		}
		for _, tc := range conns {
			if len(tc.ids) == 0 {
				continue
			}
			if tc.err == nil {
				tc.c.SetWriteDeadline(time.Now().Add(r.spec.Grace + time.Second))
				_, tc.err = tc.c.Write(tc.out)
			}
			for _, id := range tc.ids {
				if tc.err == nil {
					r.sentOK[id] = true
				} else {
					r.sendErrors++
				}
			}
			tc.out, tc.ids = tc.out[:0], tc.ids[:0]
		}
		return k
	})
}

// receiveTCP reads connection k's replies, each answering the oldest
// request sent on it and not yet answered, until the connection closes.
func (r *run) receiveTCP(tc *tcpConn, k int, turns *tcpTurns, format streamFormat) {
	rd := bufio.NewReaderSize(tc.c, 64<<10)
	for {
		// A reply's first byte comes after its request was queued.
		if _, err := rd.Peek(1); err != nil {
			if !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
				tc.badReplies++
			}
			return
		}
		id, ok := turns.oldest(k)
		if !ok {
			tc.badReplies++ // bytes no request asked for
			return
		}
		outcome, err := format.reply(r, rd, id)
		now := r.now()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
				tc.badReplies++
			}
			return
		}
		turns.answered(k)
		switch outcome {
		case replyError:
			tc.errorReplies++
		case replyOverloaded:
			r.shed[id] = true
		}
		r.recv[id] = max(now, 1)
		r.answered.Add(1)
	}
}

// preloadMemcachedTCP is PreloadMemcached over TCP: sets pipelined in
// windows on one connection, each answered STORED.
func preloadMemcachedTCP(ctx context.Context, addr string, keys, valueSize int) error {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("preload: dial %s: %w", addr, err)
	}
	defer c.Close()
	const window = 256
	value := bytes.Repeat([]byte{'v'}, valueSize)
	rd := bufio.NewReader(c)
	var req []byte
	for next := 0; next < keys; {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("preload: %w", err)
		}
		req = req[:0]
		n := 0
		for ; next < keys && n < window; next, n = next+1, n+1 {
			req = appendKey(append(req, "set "...), uint64(next))
			req = strconv.AppendInt(append(req, " 0 0 "...), int64(valueSize), 10)
			req = append(append(append(req, "\r\n"...), value...), "\r\n"...)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(req); err != nil {
			return fmt.Errorf("preload: %s: %w", addr, err)
		}
		for range n {
			line, err := rd.ReadSlice('\n')
			if err != nil {
				return fmt.Errorf("preload: %s: %w", addr, err)
			}
			if !bytes.Equal(line, []byte("STORED\r\n")) {
				return fmt.Errorf("preload: %s answered %q to a set", addr, bytes.TrimSpace(line))
			}
		}
	}
	return nil
}
