package memcached

import (
	"bytes"
	"io"
	"strconv"

	"github.com/cockroachdb/pebble"
)

// Protocol limits, as in memcached 1.6.
const (
	// KeyMaxLength is the longest key accepted.
	KeyMaxLength = 250
	// maxLineScan: a datagram's rest longer than this without a line end
	// makes memcached drop the connection's state (unless it is a get).
	maxLineScan = 2048
	// itemOverhead is what memcached adds to key and value when it sizes an
	// item against the item size limit: its 48-byte item header, the key's
	// NUL, the value's CRLF and the 8-byte CAS (flags take 4 more bytes
	// when not 0).
	itemOverhead = 48 + 1 + 2 + 8
)

// Version is the memcached version psp reports ("version", "stats"): the
// protocol it implements.
const Version = "1.6.18"

// Replies that are fixed strings.
var (
	msgError          = []byte("ERROR")
	msgBadFormat      = []byte("CLIENT_ERROR bad command line format")
	msgBadChunk       = []byte("CLIENT_ERROR bad data chunk")
	msgTooLarge       = []byte("SERVER_ERROR object too large for cache")
	msgBadExptime     = []byte("CLIENT_ERROR invalid exptime argument")
	msgBadDelta       = []byte("CLIENT_ERROR invalid numeric delta argument")
	msgNonNumeric     = []byte("CLIENT_ERROR cannot increment or decrement non-numeric value")
	msgDeleteUsage    = []byte("CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]")
	msgStored         = []byte("STORED")
	msgNotStored      = []byte("NOT_STORED")
	msgExists         = []byte("EXISTS")
	msgNotFound       = []byte("NOT_FOUND")
	msgDeleted        = []byte("DELETED")
	msgTouched        = []byte("TOUCHED")
	msgOK             = []byte("OK")
	msgReset          = []byte("RESET")
	msgMN             = []byte("MN")
	msgShutdown       = []byte("ERROR: shutdown not enabled")
	msgStoreFailed    = []byte("SERVER_ERROR out of memory storing object")
	msgVersion        = []byte("VERSION " + Version)
	msgStatsDetailUse = []byte("CLIENT_ERROR usage: stats detail on|off|dump")
	// msgUDPCut ends a UDP reply cut at its byte limit (Config.UDPReplyRatio).
	msgUDPCut = []byte("SERVER_ERROR reply too large for UDP")
	// msgLineTooLong answers a TCP retrieval line longer than Config.MaxLine
	// before the connection is closed.
	msgLineTooLong = []byte("CLIENT_ERROR line too long")
	crlf           = []byte("\r\n")
	endLine        = []byte("END\r\n")
	valuePrefix    = []byte("VALUE ")
)

// store commands.
const (
	cmdSet = iota
	cmdAdd
	cmdReplace
	cmdAppend
	cmdPrepend
	cmdCas
)

// resp marks one finished response object in session.out.
type resp struct {
	start, end int
	skip       bool // noreply: never transmitted
}

// after is what the command loop does once a command has run.
type after uint8

const (
	next      after = iota // go on with the next command
	flushNext              // transmit what is pending, then go on (gets, mn)
	quit                   // transmit what is pending, then stop (quit)
	closeConn              // drop what is pending and stop (memcached closes)
)

// session is one worker's protocol state, reused for every request it
// serves. Responses accumulate in out as memcached's response objects and
// are framed into datagrams when memcached would transmit them.
type session struct {
	app *Server
	st  *store

	tok     tokens
	key     [1 + KeyMaxLength]byte // itemPrefix + key
	cached  []byte                 // the value lookup last copied from the index's cache
	batch   *pebble.Batch
	now     int64 // unix seconds, once per request
	noreply bool

	out      []byte
	resps    []resp
	open     int // start of the open response in out; -1: none
	openSkip bool
	head     bool // framing: the next transmitted response heads the queue

	dg     datagrams // UDP: the request's reply datagrams
	stream io.Writer // TCP (not nil): responses are written here, unframed
	// swallow is how many bytes of the stream the caller must skip after
	// the command (the data of a value refused as too large).
	swallow int64
	// dataRefused: the TCP stream's data block of this storage command was
	// not read for want of memory (Config.TCPMemory).
	dataRefused bool
	// culled: the command discarded the responses pending before it.
	culled bool
	// reply is where a TCP command's responses go (stream points to it).
	reply streamReply
	keys  int // keys looked up or written in this request (emulated cost)
	cmds  int // commands in this request (emulated cost)

	stats *counters

	// Eviction (makeRoom): the index nodes taken, their keys, and the
	// stripes locked (a bit per stripe) until the batch is applied.
	victims    []int32
	victimKeys []byte
	held       [numStripes / 64]uint64

	w *writer // its part in the store's write path
}

func newSession(app *Server, stats *counters) *session {
	w := newWriter()
	app.st.addWriter(w)
	return &session{
		w:     w,
		app:   app,
		st:    app.st,
		batch: app.st.db.NewBatch(),
		out:   make([]byte, 0, 4096),
		resps: make([]resp, 0, 64),
		open:  -1,
		head:  true,
		stats: stats,
	}
}

// serve runs the commands of one request body (a datagram after its frame
// header), framing the responses into s.dg.
func (s *session) serve(body []byte) {
	s.now = s.app.clock()
	s.out, s.resps, s.open, s.head = s.out[:0], s.resps[:0], -1, true
	s.keys, s.cmds, s.swallow = 0, 0, 0
	for len(body) > 0 {
		nl := bytes.IndexByte(body, '\n')
		if nl < 0 {
			if len(body) > maxLineScan && !largeGet(body) {
				s.cull() // memcached gives up on the connection
				return
			}
			break // an unfinished line: memcached waits for more
		}
		line := body[:nl]
		body = body[nl+1:]
		if len(line) > 1 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		line = cstring(line)
		s.stats.commands.Add(1)
		s.cmds++
		a, rest, ok := s.command(line, body)
		if !ok {
			// A storage command whose data is not all there: memcached
			// waits for the rest, holding the responses it has.
			s.cull()
			return
		}
		body = rest
		switch {
		case a == flushNext || yields(s.cmds):
			s.flush()
		case a == quit:
			s.flush()
			return
		case a == closeConn:
			s.cull()
			return
		}
		if s.dg.limit > 0 {
			// Output pending past the reply's byte limit is cut for sure:
			// frame it now (it cuts) rather than pile it up.
			if s.dg.bytes+len(s.out) > s.dg.limit {
				s.frame()
			}
			if s.dg.cut {
				s.cull() // nothing more of the request is run
				return
			}
		}
	}
	s.flush()
}

// reqsPerEvent is memcached's settings.reqs_per_event (-R, 20 by default):
// of what it has read, it serves the first command and reqsPerEvent more,
// then transmits its pending responses and yields, and so on by
// reqsPerEvent.
const reqsPerEvent = 20

// yields reports whether memcached transmits after the nth command (from 1)
// of what it read at once.
func yields(n int) bool { return n > reqsPerEvent && (n-1)%reqsPerEvent == 0 }

// largeGet reports whether a line without an end that is longer than
// maxLineScan is one memcached keeps reading (a get or gets after at most
// 100 spaces).
func largeGet(b []byte) bool {
	i := 0
	for i < len(b) && b[i] == ' ' {
		i++
	}
	if i > 100 {
		return false
	}
	return bytes.HasPrefix(b[i:], []byte("get ")) || bytes.HasPrefix(b[i:], []byte("gets "))
}

// --- response objects -------------------------------------------------

// begin opens a response object (memcached's resp_start).
func (s *session) begin() {
	s.open = len(s.out)
	s.openSkip = false
}

// end closes the open response object.
func (s *session) end() {
	if s.open < 0 {
		return
	}
	s.resps = append(s.resps, resp{start: s.open, end: len(s.out), skip: s.openSkip})
	s.open = -1
}

// outString is memcached's out_string: it replaces the open response's
// content with str and CRLF, or marks it skipped under noreply.
func (s *session) outString(str []byte) {
	s.out = s.out[:s.open]
	if s.noreply {
		s.openSkip = true
		return
	}
	s.openSkip = false
	s.out = append(s.out, str...)
	s.out = append(s.out, crlf...)
}

// frame transmits the finished response objects in order. Over UDP it does
// what memcached's transmit loop does: a skipped object at the head is
// dropped; the head object is sent even when empty (a header-only
// datagram); after an object is sent, the empty and skipped objects that
// follow it are dropped. Over TCP every object not skipped is written.
func (s *session) frame() {
	if s.stream != nil {
		for _, r := range s.resps {
			if !r.skip && r.end > r.start {
				s.stream.Write(s.out[r.start:r.end])
			}
		}
		s.resps = s.resps[:0]
		s.keepOpen()
		return
	}
	for _, r := range s.resps {
		empty := r.end == r.start
		if s.head {
			if r.skip {
				continue
			}
			s.dg.message(s.out[r.start:r.end])
			s.head = false
			continue
		}
		if r.skip || empty {
			continue
		}
		s.dg.message(s.out[r.start:r.end])
	}
	s.resps = s.resps[:0]
	s.keepOpen()
}

// keepOpen drops the transmitted bytes of out, keeping the open response.
func (s *session) keepOpen() {
	if s.open < 0 {
		s.out = s.out[:0]
		return
	}
	// Keep the open response, at the front.
	n := copy(s.out, s.out[s.open:])
	s.out = s.out[:n]
	s.open = 0
}

// flush transmits everything pending and starts a new output queue.
func (s *session) flush() {
	s.end()
	s.frame()
	s.head = true
}

// cull drops every response not yet transmitted (memcached's
// conn_release_items).
func (s *session) cull() {
	s.culled = true
	s.resps = s.resps[:0]
	s.out = s.out[:0]
	s.open = -1
}

// --- commands -----------------------------------------------------------

// command runs one command line; data is what follows the line in the
// datagram. It returns what to do next, the rest of the datagram, and false
// when a storage command's data block is incomplete.
func (s *session) command(line, data []byte) (after, []byte, bool) {
	s.noreply = false
	s.begin()
	t := &s.tok
	tokenize(line, t)
	defer s.end()
	if t.n < 2 || len(t.w[0]) < 2 {
		s.outString(msgError)
		return next, data, true
	}
	cmd := t.w[0]
	// The order of the tests is memcached's (process_command_ascii): the
	// first letter picks a family, and only a line that matches none of
	// them ends with the HTTP check.
	switch first := cmd[0]; {
	case first == 'm' && len(cmd) == 2:
		if cmd[1] == 'n' {
			s.outString(msgMN)
			return flushNext, data, true
		}
		s.outString(msgError) // meta commands other than mn: not implemented
	case first == 'g':
		if t.n < 3 {
			s.outString(msgError)
			break
		}
		switch string(cmd) {
		case "get":
			return s.get(false, false), data, true
		case "gets":
			return s.get(true, false), data, true
		case "gat":
			return s.get(false, true), data, true
		case "gats":
			return s.get(true, true), data, true
		}
		s.outString(msgError)
	case first == 's':
		switch string(cmd) {
		case "set":
			return s.update(cmdSet, data)
		case "stats":
			s.statsCommand()
		case "shutdown":
			s.outString(msgShutdown)
		default: // slabs (not applicable: no slab allocator) and the rest
			s.outString(msgError)
		}
	case first == 'a':
		switch string(cmd) {
		case "add":
			return s.update(cmdAdd, data)
		case "append":
			return s.update(cmdAppend, data)
		}
		s.outString(msgError)
	case first == 'c':
		if string(cmd) == "cas" {
			return s.update(cmdCas, data)
		}
		s.outString(msgError) // cache_memlimit: no cache memory to limit
	case first == 'i':
		if string(cmd) != "incr" || (t.n != 4 && t.n != 5) {
			s.outString(msgError)
			break
		}
		s.arith(true)
	case first == 'd':
		switch {
		case string(cmd) == "delete" && t.n >= 3 && t.n <= 5:
			s.delete()
		case string(cmd) == "decr" && (t.n == 4 || t.n == 5):
			s.arith(false)
		default:
			s.outString(msgError)
		}
	case first == 't':
		if string(cmd) != "touch" || (t.n != 4 && t.n != 5) {
			s.outString(msgError)
			break
		}
		s.touch()
	case string(cmd) == "replace":
		return s.update(cmdReplace, data)
	case string(cmd) == "prepend":
		return s.update(cmdPrepend, data)
	case string(cmd) == "bget":
		if t.n < 3 {
			s.outString(msgError)
			break
		}
		return s.get(false, false), data, true
	case string(cmd) == "flush_all":
		if t.n > 4 {
			s.outString(msgError)
			break
		}
		s.flushAll()
	case string(cmd) == "version":
		s.outString(msgVersion)
	case string(cmd) == "quit":
		return quit, data, true
	case string(cmd) == "verbosity":
		if t.n != 3 && t.n != 4 {
			s.outString(msgError)
			break
		}
		s.setNoreply()
		if _, ok := safeStrtoul(t.w[1]); !ok {
			s.outString(msgBadFormat)
		} else {
			s.outString(msgOK)
		}
	case string(cmd) == "lru_crawler", string(cmd) == "watch", string(cmd) == "lru":
		s.outString(msgError) // no LRU, no crawler, no log watchers
	default:
		if bytes.HasPrefix(t.w[t.n-2], []byte("HTTP/")) {
			return closeConn, data, true
		}
		s.outString(msgError)
	}
	return next, data, true
}

// setNoreply is memcached's set_noreply_maybe: the last word "noreply"
// silences the command's response.
func (s *session) setNoreply() bool {
	t := &s.tok
	if t.n >= 2 && string(t.w[t.n-2]) == "noreply" {
		s.noreply = true
	}
	return s.noreply
}

// itemKey returns the Pebble key of a memcached key (in s.key).
func (s *session) itemKey(key []byte) []byte {
	s.key[0] = itemPrefix
	return s.key[:1+copy(s.key[1:], key)]
}

// maxDelta is memcached's REALTIME_MAXDELTA: an expiry above it is a unix
// time, not seconds from now.
const maxDelta = 60 * 60 * 24 * 30

// startSlack is how long before its start memcached dates its process_started
// (ITEM_UPDATE_INTERVAL and 2 seconds).
const startSlack = 62

// realtime turns a client's expiry (seconds from now up to 30 days, a unix
// time above that, 0 for never, negative for already expired) into a unix
// time (memcached's realtime with EXPTIME_TO_POSITIVE_TIME).
func (s *session) realtime(exptime int32) int64 {
	switch {
	case exptime == 0:
		return 0
	case exptime < 0:
		return 1 // long past
	case exptime > maxDelta:
		return int64(exptime)
	default:
		return s.now + int64(exptime)
	}
}

// get runs get, gets, gat and gats (memcached's process_get_command): one
// response object per key, END on the last one.
func (s *session) get(withCas, touch bool) after {
	t := &s.tok
	first := 1
	var exp int64
	if touch {
		e, ok := safeStrtol(t.word(1))
		if !ok {
			s.outString(msgBadExptime)
			return next
		}
		exp = s.realtime(e)
		first = 2
	}
	// memcached stops at the first key that is too long and answers only
	// an error, discarding every response not yet sent: look first. A gat
	// has touched the keys before it.
	if anyLongKey(t, first) {
		if touch {
			s.touchBeforeLongKey(t, first, exp)
		}
		s.cull()
		s.begin()
		s.outString(msgBadFormat)
		return next
	}
	// Responses before this command are transmitted before its own; the
	// key check above was the only way to discard them, so stream from
	// here on (a get of many large values never piles up in memory).
	s.frame()
	for {
		for i := first; i < t.n-1; i++ {
			s.getKey(t.w[i], withCas, touch, exp)
			if i+1 < t.n-1 {
				s.end()
				s.frame()
				if s.dg.cut {
					return next // the reply is cut: no more lookups
				}
				s.begin()
			}
		}
		if t.rest == nil {
			break
		}
		tokenize(t.rest, t)
		first = 0
		s.end()
		s.frame()
		if s.dg.cut {
			return next
		}
		s.begin()
	}
	s.out = append(s.out, endLine...)
	return flushNext
}

// eachKey calls fn with each key of the get in t from token first on, then
// each in the rest of the line (an empty one where two spaces meet), until
// fn returns false, and reports whether it never did.
func eachKey(t *tokens, first int, fn func(key []byte) bool) bool {
	for i := first; i < t.n-1; i++ {
		if !fn(t.w[i]) {
			return false
		}
	}
	rest := t.rest
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, ' ')
		if i < 0 {
			i = len(rest)
		}
		if !fn(rest[:i]) {
			return false
		}
		if i == len(rest) {
			break
		}
		rest = rest[i+1:]
	}
	return true
}

// anyLongKey reports whether a key of the get in t from token first on
// (and in the rest of the line) is longer than KeyMaxLength.
func anyLongKey(t *tokens, first int) bool {
	return !eachKey(t, first, func(key []byte) bool { return len(key) <= KeyMaxLength })
}

// touchBeforeLongKey sets the expiry of the keys of a gat in t from token
// first on that come before its first key longer than KeyMaxLength, as
// memcached does before it fails the command.
func (s *session) touchBeforeLongKey(t *tokens, first int, exp int64) {
	eachKey(t, first, func(key []byte) bool {
		if len(key) > KeyMaxLength {
			return false
		}
		if len(key) > 0 {
			s.touchItem(key, exp)
		}
		return true
	})
}

// getKey appends the response for one key of a get.
func (s *session) getKey(key []byte, withCas, touch bool, exp int64) {
	s.keys++
	if touch {
		s.stats.touchCmds.Add(1)
	} else {
		s.stats.getCmds.Add(1)
	}
	if touch {
		m := s.st.lock(key)
		if m == nil { // the store takes no writes: a miss, as a failed touch
			s.stats.touchMisses.Add(1)
			return
		}
		defer m.Unlock()
	}
	it, closer, ok := s.lookup(key, touch)
	if ok && s.stream == nil && s.dg.limit > 0 && !s.dg.fits(len(s.out)-s.open+len(valuePrefix)+len(key)+len(" 0 0\r\n\r\n")+len(it.value)) {
		closer.Close() // past the reply's byte limit: neither touched nor copied
		return
	}
	if ok && touch {
		// The item is answered as it was read; its new expiry applies
		// from now on (a gat with a past expiry returns it once).
		touched := it
		touched.exp, touched.fetched = exp, true
		if s.write(key, &touched, false, it.value) != nil {
			closer.Close()
			ok = false
		}
	}
	s.app.prefixes.record(key, prefixGet, ok)
	if !ok {
		if touch {
			s.stats.touchMisses.Add(1)
		} else {
			s.stats.getMisses.Add(1)
		}
		return
	}
	if touch {
		s.stats.touchHits.Add(1)
	} else {
		s.stats.getHits.Add(1)
		s.st.ix.touch(key, s.now)
	}
	s.out = append(s.out, valuePrefix...)
	s.out = append(s.out, key...)
	s.out = append(s.out, ' ')
	s.out = strconv.AppendUint(s.out, uint64(it.flags), 10)
	s.out = append(s.out, ' ')
	s.out = strconv.AppendUint(s.out, uint64(len(it.value)), 10)
	if withCas {
		s.out = append(s.out, ' ')
		s.out = strconv.AppendUint(s.out, it.cas, 10)
	}
	s.out = append(s.out, crlf...)
	if s.stream != nil {
		// TCP: the value goes to the stream as it is, not through out
		// (get flushed every response before this one).
		s.stream.Write(s.out[s.open:])
		s.stream.Write(it.value)
		s.stream.Write(crlf)
		s.out = s.out[:s.open]
		closer.Close()
		return
	}
	s.out = append(s.out, it.value...)
	s.out = append(s.out, crlf...)
	closer.Close()
}

// touchItem sets key's expiry if it is live (gat, touch): found says
// whether it is, err whether the store could not write it.
func (s *session) touchItem(key []byte, exp int64) (found bool, err error) {
	m := s.st.lock(key)
	if m == nil {
		return false, errNotWriting
	}
	defer m.Unlock()
	it, closer, ok := s.lookup(key, true)
	if !ok {
		return false, nil
	}
	it.exp, it.fetched = exp, true
	err = s.write(key, &it, false, it.value)
	closer.Close()
	return true, err
}

// update runs set, add, replace, append, prepend and cas (memcached's
// process_update_command and complete_nread_ascii).
func (s *session) update(op int, data []byte) (after, []byte, bool) {
	t := &s.tok
	want := 6
	if op == cmdCas {
		want = 7
	}
	if t.n != want && t.n != want+1 {
		s.outString(msgError)
		return next, data, true
	}
	s.setNoreply()
	key, ok := s.keyArg()
	if !ok {
		return next, data, true
	}
	flags, ok1 := safeStrtoul(t.w[2])
	exptime, ok2 := safeStrtol(t.w[3])
	vlen, ok3 := safeStrtol(t.w[4])
	if !ok1 || !ok2 || !ok3 {
		s.outString(msgBadFormat)
		return next, data, true
	}
	var reqCas uint64
	if op == cmdCas {
		c, ok := safeStrtoull(t.w[5])
		if !ok {
			s.outString(msgBadFormat)
			return next, data, true
		}
		reqCas = c
	}
	if vlen < 0 || int64(vlen) > int64(^uint32(0)>>1)-2 {
		s.outString(msgBadFormat)
		return next, data, true
	}
	need := int(vlen) + 2
	s.keys++
	s.app.prefixes.record(key, prefixSet, false)
	if tooLarge := !s.app.fits(len(key), flags, int(vlen)); tooLarge || s.dataRefused {
		if tooLarge {
			s.stats.storeTooLarge.Add(1)
			s.outString(msgTooLarge)
		} else {
			s.outString(msgStoreFailed) // memcached's line when its memory is full
		}
		if op == cmdSet {
			// memcached does not keep a stale value after a failed set.
			s.removeLocked(key)
		}
		if len(data) < need && s.stream != nil {
			// The caller did not read the data: it skips it in the stream.
			s.swallow = int64(need - len(data))
			return next, nil, true
		}
		if len(data) < need {
			return next, nil, false // swallowing a value that is not all there
		}
		return next, data[need:], true
	}
	if len(data) < need {
		return next, nil, false
	}
	s.stats.setCmds.Add(1) // as memcached, once the value is read into an item
	block := data[:need]
	rest := data[need:]
	if block[need-2] != '\r' || block[need-1] != '\n' {
		s.outString(msgBadChunk)
		return next, rest, true
	}
	s.outString(s.store(op, key, flags, s.realtime(exptime), reqCas, block[:vlen]))
	return next, rest, true
}

// store applies a storage command and returns its reply.
func (s *session) store(op int, key []byte, flags uint32, exp int64, reqCas uint64, value []byte) []byte {
	m := s.st.lock(key)
	if m == nil {
		return msgStoreFailed
	}
	defer m.Unlock()
	old, closer, exists := s.lookup(key, true)
	if exists {
		defer closer.Close()
	}
	switch op {
	case cmdAdd:
		if exists {
			return msgNotStored
		}
	case cmdReplace, cmdAppend, cmdPrepend:
		if !exists {
			return msgNotStored
		}
	case cmdCas:
		switch {
		case !exists:
			s.stats.casMisses.Add(1)
			return msgNotFound
		case old.cas != reqCas:
			s.stats.casBadval.Add(1)
			return msgExists
		}
		s.stats.casHits.Add(1)
	}
	size := headerLen + len(key) + len(value)
	if op == cmdAppend || op == cmdPrepend {
		size += len(old.value) // the whole item is written again
	}
	if !s.st.admit(size) {
		s.stats.storeNoMemory.Add(1)
		s.st.ix.refused(itemSize(len(key), flags, len(value)))
		if op == cmdSet {
			// memcached does not keep a stale value after a failed set.
			s.remove(key)
		}
		return msgStoreFailed
	}
	id, err := s.st.nextCas()
	if err != nil {
		if op == cmdSet {
			s.remove(key) // as above
		}
		return msgStoreFailed
	}
	it := item{flags: flags, exp: exp, cas: id, stored: s.now}
	switch op {
	case cmdAppend:
		if !s.app.fits(len(key), old.flags, len(old.value)+len(value)) {
			return msgNotStored
		}
		it.flags, it.exp = old.flags, old.exp
		err = s.write(key, &it, true, old.value, value)
	case cmdPrepend:
		if !s.app.fits(len(key), old.flags, len(old.value)+len(value)) {
			return msgNotStored
		}
		it.flags, it.exp = old.flags, old.exp
		err = s.write(key, &it, true, value, old.value)
	default:
		err = s.write(key, &it, true, value)
	}
	if err != nil {
		if op == cmdSet {
			s.remove(key) // as above
		}
		return msgStoreFailed
	}
	s.stats.totalItems.Add(1)
	return msgStored
}

// keyArg returns the command's key (its second word), or answers a key
// longer than KeyMaxLength as a bad command line and returns false.
func (s *session) keyArg() ([]byte, bool) {
	key := s.tok.w[1]
	if len(key) > KeyMaxLength {
		s.outString(msgBadFormat)
		return nil, false
	}
	return key, true
}

// arith runs incr and decr (memcached's process_arithmetic_command and
// do_add_delta).
func (s *session) arith(incr bool) {
	t := &s.tok
	s.setNoreply()
	key, ok := s.keyArg()
	if !ok {
		return
	}
	delta, ok := safeStrtoull(t.w[2])
	if !ok {
		s.outString(msgBadDelta)
		return
	}
	s.keys++
	m := s.st.lock(key)
	if m == nil {
		s.outString(msgStoreFailed)
		return
	}
	defer m.Unlock()
	it, closer, exists := s.lookup(key, true)
	if !exists {
		if incr {
			s.stats.incrMisses.Add(1)
		} else {
			s.stats.decrMisses.Add(1)
		}
		s.outString(msgNotFound)
		return
	}
	defer closer.Close()
	// The value is parsed as a C string followed by CRLF.
	var v uint64
	if len(it.value) == 0 {
		s.outString(msgNonNumeric)
		return
	}
	v, ok = parseCounter(it.value)
	if !ok {
		s.outString(msgNonNumeric)
		return
	}
	if incr {
		v += delta
		s.stats.incrHits.Add(1)
	} else {
		if delta > v {
			v = 0
		} else {
			v -= delta
		}
		s.stats.decrHits.Add(1)
	}
	var num [20]byte
	digits := strconv.AppendUint(num[:0], v, 10)
	id, err := s.st.nextCas()
	if err != nil {
		s.outString(msgStoreFailed)
		return
	}
	it.cas = id
	if len(digits) <= len(it.value) {
		// memcached rewrites the item in place, padding with spaces.
		var pad [20]byte
		n := len(it.value) - len(digits)
		for n > 0 {
			k := min(n, len(pad))
			for i := range k {
				pad[i] = ' '
			}
			digits = append(digits, pad[:k]...)
			n -= k
		}
	}
	grown := len(digits) > len(it.value) // memcached links a new item
	if err := s.write(key, &it, grown, digits); err != nil {
		s.outString(msgStoreFailed)
		return
	}
	if grown {
		s.stats.totalItems.Add(1)
	}
	s.outString(num[:len(strconv.AppendUint(num[:0], v, 10))])
}

// parseCounter parses an item's value as memcached's incr does: a C string
// (up to a NUL) followed by "\r\n".
func parseCounter(value []byte) (uint64, bool) {
	s := cstring(value)
	if len(s) < len(value) {
		return safeStrtoull(s)
	}
	// The value is followed by CR, which ends the number like a space.
	v, end, overflow := strtou(s)
	if overflow || end == 0 {
		return 0, false
	}
	if end < len(s) && !isSpace(s[end]) {
		return 0, false
	}
	if int64(v) < 0 && hasMinus(s, end) {
		return 0, false
	}
	return v, true
}

// delete runs delete (memcached's process_delete_command).
func (s *session) delete() {
	t := &s.tok
	if t.n > 3 {
		holdIsZero := string(t.w[2]) == "0"
		setsNoreply := s.setNoreply()
		valid := (t.n == 4 && (holdIsZero || setsNoreply)) || (t.n == 5 && holdIsZero && setsNoreply)
		if !valid {
			s.outString(msgDeleteUsage)
			return
		}
	}
	key, ok := s.keyArg()
	if !ok {
		return
	}
	s.app.prefixes.record(key, prefixDelete, false)
	s.keys++
	m := s.st.lock(key)
	if m == nil {
		s.outString(msgStoreFailed)
		return
	}
	defer m.Unlock()
	_, closer, exists := s.lookup(key, true)
	if !exists {
		s.stats.deleteMisses.Add(1)
		s.outString(msgNotFound)
		return
	}
	closer.Close()
	if err := s.remove(key); err != nil {
		s.outString(msgStoreFailed)
		return
	}
	s.stats.deleteHits.Add(1)
	s.outString(msgDeleted)
}

// touch runs touch (memcached's process_touch_command).
func (s *session) touch() {
	t := &s.tok
	s.setNoreply()
	key, ok := s.keyArg()
	if !ok {
		return
	}
	e, ok := safeStrtol(t.w[2])
	if !ok {
		s.outString(msgBadExptime)
		return
	}
	s.keys++
	s.stats.touchCmds.Add(1)
	found, err := s.touchItem(key, s.realtime(e))
	switch {
	case err != nil:
		s.outString(msgStoreFailed) // the store takes no writes now
	case found:
		s.stats.touchHits.Add(1)
		s.outString(msgTouched)
	default:
		s.stats.touchMisses.Add(1)
		s.outString(msgNotFound)
	}
}

// flushAll runs flush_all (memcached's process_flush_all_command).
func (s *session) flushAll() {
	t := &s.tok
	s.setNoreply()
	s.stats.flushCmds.Add(1)
	var e int32
	want := 2
	if s.noreply {
		want = 3
	}
	if t.n != want {
		v, ok := safeStrtol(t.w[1])
		if !ok {
			s.outString(msgBadExptime)
			return
		}
		e = v
	}
	at := s.now
	if e > 0 {
		at = s.realtime(e)
	}
	var err error
	if e > maxDelta && int64(e) <= s.app.started.Unix()-startSlack+1 {
		// memcached takes a time before it started as 1 (realtime) and
		// its flush then as none at all (oldest_live 0).
		err = s.st.flushNone(s.now)
	} else {
		err = s.st.flush(at, s.now)
	}
	if err != nil {
		s.stats.storeErrors.Add(1)
		s.outString(msgStoreFailed)
		return
	}
	s.outString(msgOK)
}
