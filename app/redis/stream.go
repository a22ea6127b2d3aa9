package redis

import (
	"math"
	"slices"
	"strconv"
)

// streamID is a stream entry's id, <ms>-<seq>.
type streamID struct{ ms, seq uint64 }

func (a streamID) cmp(b streamID) int {
	switch {
	case a.ms < b.ms:
		return -1
	case a.ms > b.ms:
		return 1
	case a.seq < b.seq:
		return -1
	case a.seq > b.seq:
		return 1
	}
	return 0
}

// incr sets id to its successor; false (id wrapped to 0-0) past the last
// id, as redis-server's streamIncrID.
func (id *streamID) incr() bool {
	switch {
	case id.seq != math.MaxUint64:
		id.seq++
	case id.ms != math.MaxUint64:
		id.ms++
		id.seq = 0
	default:
		*id = streamID{}
		return false
	}
	return true
}

// decr sets id to its predecessor; false (id set to the last id) before
// 0-0, as redis-server's streamDecrID.
func (id *streamID) decr() bool {
	switch {
	case id.seq != 0:
		id.seq--
	case id.ms != 0:
		id.ms--
		id.seq = math.MaxUint64
	default:
		*id = streamID{math.MaxUint64, math.MaxUint64}
		return false
	}
	return true
}

func (id streamID) appendTo(b []byte) []byte {
	b = strconv.AppendUint(b, id.ms, 10)
	b = append(b, '-')
	return strconv.AppendUint(b, id.seq, 10)
}

// streamEntry is one entry: its id and its fields and values, alternated.
type streamEntry struct {
	id     streamID
	fv     [][]byte
	node   *streamNode
	nbytes int64 // accounted size
}

// streamNode stands for one of redis-server's radix-tree nodes (a
// listpack of up to stream-node-max-entries entries, 100 by default, and
// of stream-node-max-bytes, 4096 by default): psp keeps the entries in one slice, and
// the nodes only to trim with ~ as redis-server does, whole nodes at a
// time. bytes estimates the listpack's size as redis-server encodes it
// (listpack.c), to split nodes where it does.
type streamNode struct {
	live, deleted int64
	last          streamID // the last entry appended, deleted or not
	master        streamID
	fields        [][]byte // the master entry's fields
	bytes         int64
}

// streamObj is a stream value.
type streamObj struct {
	entries []*streamEntry // by id
	nodes   []*streamNode  // in id order
	lastID  streamID       // the greatest id ever added
	// added counts the entries ever added (redis-server's
	// entries_added), maxDeleted is the greatest id XDEL deleted
	// (max_deleted_entry_id): XSETID sets them; nothing reads them back
	// (redis-server's XINFO, which psp does not have, would).
	added      int64
	maxDeleted streamID
}

// The defaults of stream-node-max-entries and stream-node-max-bytes, and
// the bound redis-server puts on a node's bytes (STREAM_LISTPACK_MAX_SIZE).
const (
	streamNodeMaxEntries = 100
	streamNodeMaxBytes   = 4096
	streamListpackMax    = 1 << 30
)

func (s *streamObj) clone() *streamObj {
	n := &streamObj{lastID: s.lastID, added: s.added, maxDeleted: s.maxDeleted}
	nodes := make(map[*streamNode]*streamNode, len(s.nodes))
	for _, nd := range s.nodes {
		c := *nd
		nodes[nd] = &c
		n.nodes = append(n.nodes, &c)
	}
	for _, e := range s.entries {
		fv := make([][]byte, len(e.fv))
		for i, b := range e.fv {
			fv[i] = copyBytes(b)
		}
		n.entries = append(n.entries, &streamEntry{id: e.id, fv: fv, node: nodes[e.node], nbytes: e.nbytes})
	}
	return n
}

// lpIntSize is the size of an integer element of a listpack, with its
// back length.
func lpIntSize(v int64) int64 {
	switch {
	case v >= 0 && v <= 127:
		return 2
	case v >= -4096 && v <= 4095:
		return 3
	case v >= -32768 && v <= 32767:
		return 4
	case v >= -8388608 && v <= 8388607:
		return 5
	case v >= math.MinInt32 && v <= math.MaxInt32:
		return 6
	}
	return 10
}

// lpStrSize is the size of a string element of a listpack (stored as an
// integer when it reads as one), with its back length.
func lpStrSize(p []byte) int64 {
	if len(p) <= 20 {
		if v, ok := string2ll(p); ok {
			return lpIntSize(v)
		}
	}
	n := int64(len(p))
	switch {
	case n <= 63:
		n++
	case n <= 4095:
		n += 2
	default:
		n += 5
	}
	switch {
	case n <= 127:
		return n + 1
	case n < 16383:
		return n + 2
	case n < 2097151:
		return n + 3
	}
	return n + 4
}

// append adds an entry of id (greater than the last) with fields and
// values fv, in the tail node or a new one as redis-server's
// streamAppendItem chooses with nodes of at most maxEntries entries
// (deleted ones included; 0: no bound) and maxBytes bytes (0: the
// listpack's own bound), and returns it.
func (s *streamObj) append(id streamID, fv [][]byte, maxEntries, maxBytes int64) *streamEntry {
	var total int64
	for _, b := range fv {
		total += int64(len(b))
	}
	var nd *streamNode
	if len(s.nodes) > 0 {
		nd = s.nodes[len(s.nodes)-1]
		if maxBytes <= 0 || maxBytes > streamListpackMax {
			maxBytes = streamListpackMax
		}
		if nd.bytes+total >= maxBytes || (maxEntries != 0 && nd.live+nd.deleted >= maxEntries) {
			nd = nil
		}
	}
	nfields := int64(len(fv) / 2)
	same := false
	if nd == nil {
		nd = &streamNode{master: id, bytes: 7 + 2 + 2 + lpIntSize(nfields) + 2}
		for i := 0; i < len(fv); i += 2 {
			nd.fields = append(nd.fields, copyBytes(fv[i]))
			nd.bytes += lpStrSize(fv[i])
		}
		s.nodes = append(s.nodes, nd)
		same = true
	} else if len(nd.fields) == len(fv)/2 {
		same = true
		for i, f := range nd.fields {
			if string(f) != string(fv[2*i]) {
				same = false
				break
			}
		}
	}
	nd.bytes += 2 + lpIntSize(int64(id.ms-nd.master.ms)) + lpIntSize(int64(id.seq-nd.master.seq))
	lpCount := nfields + 3
	for i, b := range fv {
		if same && i%2 == 0 {
			continue
		}
		nd.bytes += lpStrSize(b)
	}
	if !same {
		nd.bytes += lpIntSize(nfields)
		lpCount = nfields*2 + 4
	}
	nd.bytes += lpIntSize(lpCount)
	nd.live++
	nd.last = id
	e := &streamEntry{id: id, fv: fv, node: nd, nbytes: elemOverhead + 16 + total + int64(len(fv))*16}
	s.entries = append(s.entries, e)
	s.lastID = id
	s.added++
	return e
}

// search returns the index of the first entry whose id is id or greater.
func (s *streamObj) search(id streamID) (int, bool) {
	return slices.BinarySearchFunc(s.entries, id, func(e *streamEntry, id streamID) int { return e.id.cmp(id) })
}

// removeNode drops nd from the nodes.
func (s *streamObj) removeNode(nd *streamNode) {
	if i := slices.Index(s.nodes, nd); i >= 0 {
		s.nodes = slices.Delete(s.nodes, i, i+1)
	}
}

// del deletes the entry of id, if any, and returns its accounted size
// (0: none). A node left with no live entry goes, as in redis-server.
func (s *streamObj) del(id streamID) int64 {
	i, ok := s.search(id)
	if !ok {
		return 0
	}
	e := s.entries[i]
	s.entries = slices.Delete(s.entries, i, i+1)
	if id.cmp(s.maxDeleted) > 0 {
		s.maxDeleted = id
	}
	e.node.live--
	e.node.deleted++
	if e.node.live == 0 {
		s.removeNode(e.node)
	}
	return e.nbytes
}

// trimArgs are XADD's and XTRIM's trimming options.
type trimArgs struct {
	strategy byte // 0: none, 'l': MAXLEN, 'm': MINID
	approx   bool
	maxlen   int64
	minid    streamID
	limit    int64
}

// trim deletes entries as redis-server's streamTrim does: whole nodes
// from the first while they can all go (at most limit entries, 0: no
// limit), then, unless approx, entries of the next node one by one. It
// returns how many entries went and their accounted size.
func (s *streamObj) trim(a *trimArgs) (deleted, freed int64) {
	if a.strategy == 0 {
		return 0, 0
	}
	for len(s.nodes) > 0 {
		length := int64(len(s.entries))
		if a.strategy == 'l' && length <= a.maxlen {
			break
		}
		nd := s.nodes[0]
		if a.limit != 0 && deleted+nd.live > a.limit {
			break
		}
		var whole bool
		if a.strategy == 'l' {
			whole = length-nd.live >= a.maxlen
		} else {
			whole = nd.last.cmp(a.minid) < 0
		}
		if whole {
			n := int(nd.live)
			for _, e := range s.entries[:n] {
				freed += e.nbytes
			}
			s.entries = slices.Delete(s.entries, 0, n)
			s.nodes = s.nodes[1:]
			deleted += nd.live
			continue
		}
		if a.approx {
			break
		}
		n := 0
		for n < len(s.entries) && s.entries[n].node == nd {
			if a.strategy == 'l' && int64(len(s.entries)-n) <= a.maxlen {
				break
			}
			if a.strategy == 'm' && s.entries[n].id.cmp(a.minid) >= 0 {
				break
			}
			freed += s.entries[n].nbytes
			n++
		}
		s.entries = slices.Delete(s.entries, 0, n)
		nd.live -= int64(n)
		nd.deleted += int64(n)
		deleted += int64(n)
		break
	}
	return deleted, freed
}

// strtoull parses p as C's strtoull does for redis-server's string2ull
// once string2ll has failed: leading spaces, a sign (a minus negates,
// modulo 2^64), decimal digits to the end, no overflow.
func strtoull(p []byte) (uint64, bool) {
	i := 0
	for i < len(p) && (p[i] == ' ' || (p[i] >= '\t' && p[i] <= '\r')) {
		i++
	}
	neg := false
	if i < len(p) && (p[i] == '+' || p[i] == '-') {
		neg = p[i] == '-'
		i++
	}
	if i == len(p) {
		return 0, false
	}
	var v uint64
	for ; i < len(p); i++ {
		d := p[i] - '0'
		if d > 9 {
			return 0, false
		}
		if v > (math.MaxUint64-uint64(d))/10 {
			return 0, false
		}
		v = v*10 + uint64(d)
	}
	if neg {
		v = -v
	}
	return v, true
}

// string2ull is redis-server's string2ull.
func string2ull(p []byte) (uint64, bool) {
	if v, ok := string2ll(p); ok {
		if v < 0 {
			return 0, false
		}
		return uint64(v), true
	}
	if len(p) == 0 {
		return 0, false
	}
	return strtoull(p)
}

// parseStreamID parses p as redis-server's streamGenericParseIDOrReply:
// "-" and "+" (unless strict), <ms>, <ms>-<seq>, and with seqAuto
// <ms>-* (seqGiven false). An id without its sequence has missingSeq.
func parseStreamID(p []byte, missingSeq uint64, strict, seqAuto bool) (id streamID, seqGiven, ok bool) {
	if len(p) > 127 {
		return id, false, false
	}
	for i, b := range p { // redis-server reads the id as a C string
		if b == 0 {
			p = p[:i]
			break
		}
	}
	if len(p) == 1 && (p[0] == '-' || p[0] == '+') {
		if strict {
			return id, false, false
		}
		if p[0] == '-' {
			return streamID{}, true, true
		}
		return streamID{math.MaxUint64, math.MaxUint64}, true, true
	}
	seqGiven = true
	msPart, seqPart, dash := p, []byte(nil), false
	for i, b := range p {
		if b == '-' {
			msPart, seqPart, dash = p[:i], p[i+1:], true
			break
		}
	}
	ms, ok := string2ull(msPart)
	if !ok {
		return id, false, false
	}
	seq := missingSeq
	if dash {
		if seqAuto && len(seqPart) == 1 && seqPart[0] == '*' {
			seq, seqGiven = 0, false
		} else if seq, ok = string2ull(seqPart); !ok {
			return id, false, false
		}
	}
	return streamID{ms, seq}, seqGiven, true
}
