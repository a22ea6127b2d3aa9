package memcached

import (
	"bytes"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/nic"
)

// OverloadedLine is the reply line of a shed request that would have
// stored a value (set, add, replace, append, prepend, cas): memcached 1.6's
// own line for a storage command it cannot carry out for want of memory.
// libmemcached recognises exactly this line
// (MEMCACHED_SERVER_MEMORY_ALLOCATION_FAILURE, which its memcached_fatal
// does not count as a failure of the server: the connection is kept and
// the server stays in the pool, and the caller may try again), while any
// other SERVER_ERROR text is a MEMCACHED_SERVER_ERROR it treats as fatal.
const OverloadedLine = "SERVER_ERROR out of memory storing object\r\n"

// BusyLine is the reply line of any other shed request (a get, a
// multi-get, incr, delete, touch, ...): the server is busy, not out of
// memory, and the request may be sent again. memcached has no line for
// it; clients report it as a server error carrying this text.
const BusyLine = "SERVER_ERROR busy, request shed: try again\r\n"

// ReplyOverloaded implements app.OverloadReplier: the dispatcher
// calls it, on its own goroutine, for a request it sheds unserved (its type
// over its budget, past its deadline in the queue, still queued at
// shutdown). A request that would have been answered gets one datagram, its
// own frame header (request id echoed, sequence 0, total 1) and one line:
// OverloadedLine when it holds a storage command, BusyLine otherwise (a
// multi-get too: the line ends the reply, as a SERVER_ERROR from memcached
// does). Nothing else gets a reply:
// a datagram that is not a request memcached would serve (8 bytes or less,
// a datagram count other than 1) and a request none of whose commands
// would be answered (all noreply, a quit alone, a value cut short), exactly
// as HandleMulti would answer nothing. Nothing of a shed request is run,
// so a shed write stores nothing. A command cut from a TCP stream is
// answered its line alone, in its turn (a quit closes the connection, a
// noreply command gets nothing). ReplyOverloaded reads only the
// request's buffer, allocates nothing and is safe to call concurrently
// with the workers.
func (s *Server) ReplyOverloaded(_ app.Type, b *nic.Buffer) bool {
	if b.Len < 0 || b.Len > len(b.Data) || len(b.Data) < UDPHeaderLen+max(len(OverloadedLine), len(BusyLine)) {
		return false
	}
	p := b.Payload()
	if b.Flags&nic.FromStream != 0 {
		reply, stores := shedVerdict(p)
		switch {
		case string(commandWord(p)) == "quit":
			b.Len, b.Flags = 0, nic.ReplyClose
		case !reply:
			return false // nothing in its turn
		default:
			b.Len, b.Flags = copy(b.Data, ShedLine(stores)), 0
		}
		return true
	}
	h, ok := ParseFrameHeader(p)
	if !ok || len(p) == UDPHeaderLen || h.Total != 1 {
		return false
	}
	reply, stores := shedVerdict(p[UDPHeaderLen:])
	if !reply {
		return false
	}
	FrameHeader{RequestID: h.RequestID, Total: 1}.Put(b.Data)
	b.Len = UDPHeaderLen + copy(b.Data[UDPHeaderLen:], ShedLine(stores))
	return true
}

// ShedLine is the line a shed request is answered with: OverloadedLine
// for one that stores a value, BusyLine for any other.
func ShedLine(stores bool) string {
	if stores {
		return OverloadedLine
	}
	return BusyLine
}

// shedScan bounds what wantsReply reads of a request: the bytes of its
// command lines (data blocks are skipped without being read). It runs on
// the dispatcher's goroutine for every shed request, where a datagram of
// 64 KiB of noreply commands would otherwise cost about 170 µs; the first
// line decides every common request. The bytes read are at most twice
// shedScan.
const shedScan = 2048

// wantsReply reports whether serving request body (a datagram after its
// frame header) would transmit a response that is not empty: it walks the
// commands as session.serve and session.command do, without running them.
// A response is pending until a command flushes the output (a get, mn,
// quit) or the request ends; a storage command whose value is cut short, a
// line over maxLineScan bytes that never ends and an HTTP request line drop
// what is pending, as memcached does. It reads shedScan bytes of command
// lines and the line that crosses that bound (a line longer than shedScan
// is cut there): what follows is taken to change nothing.
func wantsReply(body []byte) bool {
	reply, _ := shedVerdict(body)
	return reply
}

// shedVerdict is wantsReply, and whether the commands it read hold a
// storage command (set, add, replace, append, prepend, cas).
func shedVerdict(body []byte) (reply, stores bool) {
	var t tokens
	sent, pending := false, false
	for scanned := 0; len(body) > 0 && scanned < shedScan; {
		nl := bytes.IndexByte(body, '\n')
		if nl < 0 {
			if len(body) > maxLineScan && !largeGet(body) {
				return sent, stores
			}
			break
		}
		line := body[:nl]
		body = body[nl+1:]
		if len(line) > 1 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		line = line[:min(len(line), shedScan)]
		scanned += nl + 1
		tokenize(cstring(line), &t)
		r, need := replyOf(&t)
		if need >= 0 {
			if len(body) < need {
				return sent, stores // the value is cut short: nothing pending is sent
			}
			body = body[need:]
			stores = true
		}
		switch r {
		case replies:
			pending = true
		case repliesNow:
			sent = true
		case quits:
			return sent || pending, stores
		case closes:
			return sent, stores
		}
	}
	return sent || pending, stores
}

// What a command line does to the reply (replyOf).
const (
	replies    = iota // a response, transmitted later
	silent            // noreply
	repliesNow        // a response, transmitted with what is pending (a get, mn)
	quits             // quit: what is pending is transmitted, the rest ignored
	closes            // an HTTP request line: nothing pending is transmitted, the rest ignored
)

// replyOf tells what command line t does to the reply, following
// session.command's tests in their order (and the commands' own checks
// where they decide whether noreply applies), and how many bytes of data
// block follow the line (-1: none; a storage command whose line parses).
func replyOf(t *tokens) (r int, need int) {
	if t.n < 2 || len(t.w[0]) < 2 {
		return replies, -1
	}
	cmd, last := t.w[0], t.w[t.n-2]
	switch first := cmd[0]; {
	case first == 'm' && len(cmd) == 2:
		if cmd[1] == 'n' {
			return repliesNow, -1
		}
	case first == 'g':
		switch string(cmd) {
		case "get", "gets", "gat", "gats":
			if t.n >= 3 {
				return getReply(t, cmd[1] == 'a'), -1
			}
		}
	case first == 's':
		if string(cmd) == "set" {
			return storeReply(t, 6)
		}
	case first == 'a':
		if string(cmd) == "add" || string(cmd) == "append" {
			return storeReply(t, 6)
		}
	case first == 'c':
		if string(cmd) == "cas" {
			return storeReply(t, 7)
		}
	case first == 'i':
		if string(cmd) == "incr" && (t.n == 4 || t.n == 5) {
			return noreplyIf(last), -1
		}
	case first == 'd':
		// delete of a key alone never reads noreply ("delete noreply"
		// deletes the key "noreply").
		if (string(cmd) == "delete" || string(cmd) == "decr") && (t.n == 4 || t.n == 5) {
			return noreplyIf(last), -1
		}
	case first == 't':
		if string(cmd) == "touch" && (t.n == 4 || t.n == 5) {
			return noreplyIf(last), -1
		}
	case string(cmd) == "replace", string(cmd) == "prepend":
		return storeReply(t, 6)
	case string(cmd) == "bget":
		if t.n >= 3 {
			return getReply(t, false), -1
		}
	case string(cmd) == "flush_all":
		if t.n <= 4 {
			return noreplyIf(last), -1
		}
	case string(cmd) == "quit":
		return quits, -1
	case string(cmd) == "verbosity":
		if t.n == 3 || t.n == 4 {
			return noreplyIf(last), -1
		}
	case string(cmd) == "version", string(cmd) == "lru_crawler", string(cmd) == "watch", string(cmd) == "lru":
	default:
		if bytes.HasPrefix(last, []byte("HTTP/")) {
			return closes, -1
		}
	}
	return replies, -1 // an answer, an error or ERROR
}

// noreplyIf is session.setNoreply's test on a command's last word.
func noreplyIf(last []byte) int {
	if string(last) == "noreply" {
		return silent
	}
	return replies
}

// getReply is what session.get does to the reply: an error it leaves
// pending (a bad exptime of gat, a key too long), or its values and END,
// transmitted at once.
func getReply(t *tokens, touch bool) int {
	first := 1
	if touch {
		if _, ok := safeStrtol(t.word(1)); !ok {
			return replies
		}
		first = 2
	}
	if anyLongKey(t, first) {
		return replies
	}
	return repliesNow
}

// storeReply follows session.update: a line of the wrong length is ERROR;
// otherwise noreply applies, and the data block follows when the line's
// numbers parse (want is the word count of the line without noreply, the
// command included, plus one).
func storeReply(t *tokens, want int) (int, int) {
	if t.n != want && t.n != want+1 {
		return replies, -1
	}
	r := noreplyIf(t.w[t.n-2])
	if len(t.w[1]) > KeyMaxLength {
		return r, -1
	}
	_, ok1 := safeStrtoul(t.w[2])
	_, ok2 := safeStrtol(t.w[3])
	vlen, ok3 := safeStrtol(t.w[4])
	if !ok1 || !ok2 || !ok3 {
		return r, -1
	}
	if want == 7 {
		if _, ok := safeStrtoull(t.w[5]); !ok {
			return r, -1
		}
	}
	if vlen < 0 || int64(vlen) > int64(^uint32(0)>>1)-2 {
		return r, -1
	}
	return r, int(vlen) + 2
}
