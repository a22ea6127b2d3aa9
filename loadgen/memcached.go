package loadgen

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"
)

// FormatMemcached is memcached's text protocol over UDP (the memcached
// application, or memcached itself): each request is one datagram with
// memcached's 8-byte frame header (request id = schedule index mod 65536)
// and one command chosen by the request type's name: GET ("get k"),
// MULTIGET or MGET ("get k1 ... kN", Spec.MultiGetKeys keys) and SET
// ("set k 0 0 N" and a value of Spec.ValueSize bytes). Keys are "k0" to
// "k<Keys-1>", drawn from the request id. A request is answered when the
// datagram that ends its reply arrives (END for reads, the reply line
// otherwise); error lines (ERROR, CLIENT_ERROR, SERVER_ERROR) count as
// ErrorReplies, except memcached's lines for a request it could not carry
// out for want of memory ("SERVER_ERROR out of memory ...", which psp
// serve --app memcached sends for every write it sheds) and psp's line for
// any other request it sheds ("SERVER_ERROR busy ..."): those count as
// Overloaded, neither answered nor lost.
const FormatMemcached = "memcached"

// Defaults of the memcached format.
const (
	DefaultMemcachedKeys = 10000
	DefaultMultiGetKeys  = 100
	DefaultValueSize     = 64
)

// memcached commands, per workload type.
const (
	mcGet = iota
	mcMultiGet
	mcSet
)

// memcachedCommands maps each schedule type to a command.
func memcachedCommands(sched *Schedule) ([]uint8, error) {
	cmds := make([]uint8, len(sched.Types))
	for i, t := range sched.Types {
		switch strings.ToUpper(t.Name) {
		case "GET":
			cmds[i] = mcGet
		case "MULTIGET", "MGET":
			cmds[i] = mcMultiGet
		case "SET":
			cmds[i] = mcSet
		default:
			return nil, fmt.Errorf("type %q in the memcached format: %w (want GET, MULTIGET or SET, e.g. the memcached workload)", t.Name, ErrBadSpec)
		}
	}
	return cmds, nil
}

// memcachedRequestLen is the longest request the spec builds.
func memcachedRequestLen(s Spec) int {
	key := 1 + len(strconv.Itoa(s.MemcachedKeys))
	mget := 8 + len("get") + s.MultiGetKeys*(1+key) + 2
	set := 8 + len("set  0 0 \r\n\r\n") + key + len(strconv.Itoa(s.ValueSize)) + s.ValueSize
	return max(mget, set)
}

// appendKey appends key number k ("k" and its decimal digits).
func appendKey(b []byte, k uint64) []byte {
	return strconv.AppendUint(append(b, 'k'), k, 10)
}

// encodeMemcached writes request id's datagram into b and returns it.
func (r *run) encodeMemcached(b []byte, id int, typ int) []byte {
	b = b[:0]
	var h [8]byte
	binary.BigEndian.PutUint16(h[0:], uint16(id))
	binary.BigEndian.PutUint16(h[4:], 1)
	b = append(b, h[:]...)
	return r.memcachedCommand(b, id, typ)
}

// memcachedCommand appends request id's command to b.
func (r *run) memcachedCommand(b []byte, id int, typ int) []byte {
	s := &r.spec
	keys := uint64(s.MemcachedKeys)
	switch r.mcCmds[typ] {
	case mcGet:
		b = append(b, "get "...)
		b = appendKey(b, mix64(uint64(id))%keys)
	case mcMultiGet:
		b = append(b, "get"...)
		for j := range s.MultiGetKeys {
			b = appendKey(append(b, ' '), mix64(uint64(id)*uint64(s.MultiGetKeys)+uint64(j))%keys)
		}
	default:
		b = append(b, "set "...)
		b = appendKey(b, mix64(uint64(id))%keys)
		b = append(b, " 0 0 "...)
		b = strconv.AppendInt(b, int64(s.ValueSize), 10)
		b = append(b, "\r\n"...)
		b = append(b, r.mcValue...)
	}
	return append(b, "\r\n"...)
}

var (
	mcEnd    = []byte("END\r\n")
	mcValue  = []byte("VALUE ")
	mcErrors = [][]byte{[]byte("ERROR"), []byte("CLIENT_ERROR"), []byte("SERVER_ERROR")}
	// mcOutOfMemory are the starts of memcached 1.6's lines for a request
	// it did not carry out for want of memory ("SERVER_ERROR out of memory
	// storing object", "... writing get response", "SERVER_ERROR Out of
	// memory allocating item", ...) and of psp's line for a request it
	// shed while busy: the server shed the request.
	mcOutOfMemory = [][]byte{[]byte("SERVER_ERROR out of memory"), []byte("SERVER_ERROR Out of memory"), []byte("SERVER_ERROR busy")}
)

// What a reply datagram does to its request (memcachedReplyEnd).
const (
	mcMore       = iota // not the end of the reply
	mcAnswer            // ends the reply
	mcError             // ends the reply with an error line
	mcOverloaded        // ends the reply: the server shed the request
)

// memcachedReplyEnd tells whether datagram p ends a reply, and how.
func memcachedReplyEnd(p []byte) int {
	seq := binary.BigEndian.Uint16(p[2:])
	total := binary.BigEndian.Uint16(p[4:])
	body := p[8:]
	switch {
	case total == 0 || seq != total-1:
		return mcMore // empty, or not the last datagram of its message
	case bytes.HasSuffix(body, mcEnd):
		return mcAnswer
	case total == 1 && bytes.HasPrefix(body, mcValue):
		return mcMore // one value of a multi-get: more follows
	}
	for _, o := range mcOutOfMemory {
		if bytes.HasPrefix(body, o) {
			return mcOverloaded
		}
	}
	for _, e := range mcErrors {
		if bytes.HasPrefix(body, e) {
			return mcError
		}
	}
	return mcAnswer
}

// handleMemcachedReply matches a memcached reply datagram to the latest
// request with its id that was due by now (ids repeat every 65536
// requests).
func (r *run) handleMemcachedReply(p []byte, now int64) {
	if len(p) < 8 {
		r.badReplies++
		return
	}
	end := memcachedReplyEnd(p)
	if end == mcMore {
		return
	}
	reqs := r.sched.Requests
	due := sort.Search(len(reqs), func(i int) bool { return reqs[i].At > now })
	id := int(binary.BigEndian.Uint16(p))
	if due == 0 || id > due-1 {
		r.badReplies++
		return
	}
	i := id + (due-1-id)/65536*65536
	if r.recv[i] != 0 {
		r.duplicates++
		return
	}
	switch end {
	case mcError:
		r.errorReplies++
	case mcOverloaded:
		// The server shed the request unserved and said so: not an
		// answer, not lost either.
		r.shed[i] = true
	}
	r.recv[i] = max(now, 1)
	r.answered.Add(1)
}

// MaxMemcachedKeys is the largest memcached key space (Spec.MemcachedKeys).
const MaxMemcachedKeys = 1_000_000_000

// silentWindows is how many windows of sets PreloadMemcached sends
// without any reply before it gives up on the server.
const silentWindows = 4

// maxMissed is how many unacknowledged sets PreloadMemcached keeps to
// resend before it gives up on the server.
const maxMissed = 1 << 20

// PreloadMemcached stores keys "k0" to "k<keys-1>" with values of
// valueSize bytes on the memcached server at addr (host:port over UDP,
// tcp://host:port over TCP), so that the memcached format's reads hit.
// Over UDP it keeps a window of sets in flight and resends those not
// acknowledged; it fails when some key is still not stored after a few
// attempts. Over TCP it pipelines the sets on one connection.
func PreloadMemcached(ctx context.Context, addr string, keys, valueSize int) error {
	if keys < 1 || keys > MaxMemcachedKeys || valueSize < 0 || valueSize > 1<<20 {
		return fmt.Errorf("preload: %d keys of %d bytes: %w (want 1..%d keys of at most 1 MiB)", keys, valueSize, ErrBadSpec, MaxMemcachedKeys)
	}
	if tcp, ok := tcpAddr(addr); ok {
		return preloadMemcachedTCP(ctx, tcp, keys, valueSize)
	}
	addr, err := udpAddr(addr)
	if err != nil {
		return fmt.Errorf("preload: %w", err)
	}
	if n := memcachedRequestLen(Spec{MemcachedKeys: keys, MultiGetKeys: 2, ValueSize: valueSize}); n > maxDatagram {
		return fmt.Errorf("preload: value size %d: %w (a set of %d bytes does not fit one UDP datagram of %d)", valueSize, ErrBadSpec, n, maxDatagram)
	}
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return fmt.Errorf("preload: resolve %q: %w", addr, err)
	}
	conn, err := net.DialUDP("udp", nil, raddr)
	if err != nil {
		return fmt.Errorf("preload: dial %s: %w", raddr, err)
	}
	defer conn.Close()
	const window, attempts = 64, 5
	value := bytes.Repeat([]byte{'v'}, valueSize)
	req := make([]byte, 0, 64+valueSize)
	buf := make([]byte, 2048)
	// The first attempt walks the keys in order; later ones resend what
	// was missed, which is bounded (maxMissed), so that a large key space
	// costs no memory.
	var todo []int
	next := 0 // first attempt: the next key not yet sent
	batch := make([]int, 0, window)
	replies := 0 // datagrams the server sent back, stored or not
	for attempt := 0; attempt < attempts && (next < keys || len(todo) > 0); attempt++ {
		var missed []int
		for next < keys || len(todo) > 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("preload: %w", err)
			}
			batch = batch[:0]
			if attempt == 0 {
				for ; next < keys && len(batch) < window; next++ {
					batch = append(batch, next)
				}
			} else {
				batch = append(batch, todo[:min(window, len(todo))]...)
				todo = todo[len(batch):]
			}
			pending := map[uint16]int{}
			for _, k := range batch {
				id := uint16(k)
				req = req[:0]
				var h [8]byte
				binary.BigEndian.PutUint16(h[0:], id)
				binary.BigEndian.PutUint16(h[4:], 1)
				req = append(req, h[:]...)
				req = appendKey(append(req, "set "...), uint64(k))
				req = strconv.AppendInt(append(req, " 0 0 "...), int64(valueSize), 10)
				req = append(append(append(req, "\r\n"...), value...), "\r\n"...)
				if _, err := conn.Write(req); err != nil && !errors.Is(err, net.ErrClosed) {
					missed = append(missed, k)
					continue
				}
				pending[id] = k
			}
			deadline := time.Now().Add(300 * time.Millisecond)
			for len(pending) > 0 {
				_ = conn.SetReadDeadline(deadline)
				n, err := conn.Read(buf)
				if err != nil {
					break // timeout (or refused): resend what is pending
				}
				replies++
				if n >= 16 && bytes.Equal(buf[8:16], []byte("STORED\r\n")) {
					delete(pending, binary.BigEndian.Uint16(buf))
				}
			}
			if replies == 0 && next >= silentWindows*window {
				return fmt.Errorf("preload: no reply from %s to the first %d sets (is a memcached server listening there?)", addr, next)
			}
			for _, k := range pending {
				missed = append(missed, k)
			}
			if len(missed) > maxMissed {
				return fmt.Errorf("preload: over %d sets not acknowledged by %s (is a memcached server listening?)", maxMissed, addr)
			}
		}
		todo = missed
	}
	if len(todo) > 0 {
		return fmt.Errorf("preload: %d of %d keys not stored on %s after %d attempts (is a memcached server listening?)", len(todo), keys, addr, attempts)
	}
	return nil
}
