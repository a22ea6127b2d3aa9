package redis

import "math"

const errStreamID = "Invalid stream ID specified as stream command argument"

// parseTrimArgs parses XADD's (xadd) and XTRIM's options from argument
// 2 as redis-server's streamParseAddOrTrimArgsOrReply does. For XADD it
// also parses the id and returns the position of the id; the reply is
// written and ok false on an error.
func (c *ctx) parseTrimArgs(a *trimArgs, xadd bool) (idpos int, id streamID, idGiven, seqGiven, noMk, ok bool) {
	limitGiven := false
	argv := c.argv
	i := 2
	for ; i < len(argv); i++ {
		more := len(argv) - 1 - i
		opt := argv[i]
		switch {
		case xadd && len(opt) == 1 && opt[0] == '*':
		case (equalFold(opt, "maxlen") || equalFold(opt, "minid")) && more > 0:
			if a.strategy != 0 {
				c.o.err("syntax error, MAXLEN and MINID options at the same time are not compatible")
				return
			}
			a.approx = false
			next := argv[i+1]
			if more >= 2 && len(next) == 1 && (next[0] == '~' || next[0] == '=') {
				a.approx = next[0] == '~'
				i++
			}
			if equalFold(opt, "maxlen") {
				v, vok := string2ll(argv[i+1])
				if !vok {
					c.o.writeString(errNotInt)
					return
				}
				if v < 0 {
					c.o.err("The MAXLEN argument must be >= 0.")
					return
				}
				a.maxlen, a.strategy = v, 'l'
			} else {
				mid, _, idok := parseStreamID(argv[i+1], 0, true, false)
				if !idok {
					c.o.err(errStreamID)
					return
				}
				a.minid, a.strategy = mid, 'm'
			}
			i++
			continue
		case equalFold(opt, "limit") && more > 0:
			v, vok := string2ll(argv[i+1])
			if !vok {
				c.o.writeString(errNotInt)
				return
			}
			if v < 0 {
				c.o.err("The LIMIT argument must be >= 0.")
				return
			}
			a.limit, limitGiven = v, true
			i++
			continue
		case xadd && equalFold(opt, "nomkstream"):
			noMk = true
			continue
		case xadd:
			var idok bool
			id, seqGiven, idok = parseStreamID(opt, 0, true, true)
			if !idok {
				c.o.err(errStreamID)
				return
			}
			idGiven = true
		default:
			c.o.writeString(errSyntax)
			return
		}
		break
	}
	if a.limit != 0 && a.strategy == 0 {
		c.o.err("syntax error, LIMIT cannot be used without specifying a trimming strategy")
		return
	}
	if !xadd && a.strategy == 0 {
		c.o.err("syntax error, XTRIM must be called with a trimming strategy")
		return
	}
	switch {
	case limitGiven && !a.approx:
		c.o.err("syntax error, LIMIT cannot be used without the special ~ option")
		return
	case !limitGiven && a.approx:
		// At most 100 nodes' entries, bounded on both sides as
		// redis-server does (the product can overflow).
		a.limit = 100 * c.s.streamNodeEntries.Load()
		if a.limit <= 0 {
			a.limit = 10000
		}
		if a.limit > 1000000 {
			a.limit = 1000000
		}
	case !limitGiven:
		a.limit = 0
	}
	return i, id, idGiven, seqGiven, noMk, true
}

// cmdXadd is XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT
// count]] *|id field value [field value ...].
func cmdXadd(c *ctx) {
	var a trimArgs
	idpos, id, idGiven, seqGiven, noMk, ok := c.parseTrimArgs(&a, true)
	if !ok {
		return
	}
	fieldPos := idpos + 1
	if n := len(c.argv) - fieldPos; n < 2 || n%2 == 1 {
		c.o.err("wrong number of arguments for '" + c.cmd.name + "' command")
		return
	}
	if idGiven && seqGiven && id == (streamID{}) {
		c.o.err("The ID specified in XADD must be greater than 0-0")
		return
	}
	key := c.argv[1]
	sh, h, e := c.writeEntry(key)
	defer sh.mu.Unlock()
	if c.wrongType(e, kindStream) {
		return
	}
	if e == nil {
		if noMk {
			c.o.null()
			return
		}
		e = c.s.db.add(sh, key, h, kindStream)
		e.obj = &streamObj{}
	}
	s := e.obj.(*streamObj)
	if s.lastID == (streamID{math.MaxUint64, math.MaxUint64}) {
		c.o.err("The stream has exhausted the last possible ID, unable to add more items")
		return
	}
	switch {
	case !idGiven:
		now := uint64(c.now())
		if now > s.lastID.ms {
			id = streamID{now, 0}
		} else {
			id = s.lastID
			id.incr()
		}
	case !seqGiven && s.lastID.ms == id.ms:
		if s.lastID.seq == math.MaxUint64 {
			// redis-server's streamAppendItem fails here without setting
			// errno, and xaddCommand answers its other error.
			c.o.err("Elements are too large to be stored")
			return
		} else {
			id = streamID{id.ms, s.lastID.seq + 1}
		}
	}
	if id.cmp(s.lastID) <= 0 {
		c.o.err("The ID specified in XADD is equal or smaller than the target stream top item")
		return
	}
	fv := make([][]byte, len(c.argv)-fieldPos)
	for i, b := range c.argv[fieldPos:] {
		fv[i] = copyBytes(b)
	}
	ne := s.append(id, fv, c.s.streamNodeEntries.Load(), c.s.streamNodeBytes.Load())
	grow := ne.nbytes
	var buf [42]byte
	c.o.bulk(id.appendTo(buf[:0]))
	_, freed := s.trim(&a)
	c.s.db.resize(e, e.size+grow-freed)
	sh.modified(key)
}

func cmdXlen(c *ctx) {
	sh, s, ok := readValue[*streamObj](c, c.argv[1], kindStream, czero)
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	c.o.integer(int64(len(s.entries)))
}

// parseIntervalID parses a bound of XRANGE as redis-server's
// streamParseIntervalIDOrReply: "(" makes it exclusive.
func parseIntervalID(p []byte, missingSeq uint64) (id streamID, exclusive, ok bool) {
	if len(p) > 1 && p[0] == '(' {
		id, _, ok = parseStreamID(p[1:], missingSeq, true, false)
		return id, true, ok
	}
	id, _, ok = parseStreamID(p, missingSeq, false, false)
	return id, false, ok
}

func cmdXrange(c *ctx)    { xrange(c, false) }
func cmdXrevrange(c *ctx) { xrange(c, true) }

func xrange(c *ctx, rev bool) {
	startArg, endArg := c.argv[2], c.argv[3]
	if rev {
		startArg, endArg = endArg, startArg
	}
	start, ex, ok := parseIntervalID(startArg, 0)
	if !ok {
		c.o.err(errStreamID)
		return
	}
	if ex && !start.incr() {
		c.o.err("invalid start ID for the interval")
		return
	}
	end, ex, ok := parseIntervalID(endArg, math.MaxUint64)
	if !ok {
		c.o.err(errStreamID)
		return
	}
	if ex && !end.decr() {
		c.o.err("invalid end ID for the interval")
		return
	}
	count := int64(-1)
	for j := 4; j < len(c.argv); j++ {
		if !equalFold(c.argv[j], "count") || j+1 == len(c.argv) {
			c.o.writeString(errSyntax)
			return
		}
		v, vok := string2ll(c.argv[j+1])
		if !vok {
			c.o.writeString(errNotInt)
			return
		}
		count = max(v, 0)
		j++
	}
	sh, s, ok := readValue[*streamObj](c, c.argv[1], kindStream, emptyArray)
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	if count == 0 {
		c.o.nullArray()
		return
	}
	c.writeRange(s, start, end, count, rev)
}

// writeRange writes the entries of s from start to end (both included),
// at most count (<= 0: all), backwards with rev.
func (c *ctx) writeRange(s *streamObj, start, end streamID, count int64, rev bool) {
	if start.cmp(end) > 0 {
		c.o.arrayLen(0)
		return
	}
	lo, _ := s.search(start)
	hi := lo
	for hi < len(s.entries) && s.entries[hi].id.cmp(end) <= 0 {
		hi++
	}
	n := hi - lo
	if count > 0 && int64(n) > count {
		n = int(count)
	}
	c.o.arrayLen(n)
	for k := range n {
		i := lo + k
		if rev {
			i = hi - 1 - k
		}
		c.writeStreamEntry(s.entries[i])
	}
}

func (c *ctx) writeStreamEntry(e *streamEntry) {
	var buf [42]byte
	c.o.arrayLen(2)
	c.o.bulk(e.id.appendTo(buf[:0]))
	c.o.arrayLen(len(e.fv))
	for _, b := range e.fv {
		c.o.bulk(b)
	}
}

func cmdXdel(c *ctx) {
	sh, e, ok := c.writeKind(c.argv[1], kindStream, czero)
	defer sh.mu.Unlock()
	if !ok {
		return
	}
	ids := make([]streamID, len(c.argv)-2)
	for j, p := range c.argv[2:] {
		id, _, idok := parseStreamID(p, 0, true, false)
		if !idok {
			c.o.err(errStreamID)
			return
		}
		ids[j] = id
	}
	s := e.obj.(*streamObj)
	deleted := 0
	for _, id := range ids {
		if freed := s.del(id); freed != 0 {
			c.s.db.resize(e, e.size-freed)
			deleted++
		}
	}
	if deleted > 0 {
		sh.modified(c.argv[1])
	}
	c.o.integer(int64(deleted))
}

// cmdXsetid sets a stream's last id (what XADD's ids must exceed) and,
// with ENTRIESADDED and MAXDELETEDID, its count of entries ever added and
// its greatest deleted id, checked as redis-server's xsetidCommand: the
// arguments first, then against the stream's top entry and length.
func cmdXsetid(c *ctx) {
	id, _, ok := parseStreamID(c.argv[2], 0, true, false)
	if !ok {
		c.o.err(errStreamID)
		return
	}
	added := int64(-1)
	var maxDeleted streamID
	for i := 3; i < len(c.argv); i += 2 {
		opt, more := c.argv[i], i+1 < len(c.argv)
		switch {
		case equalFold(opt, "entriesadded") && more:
			v, vok := string2ll(c.argv[i+1])
			if !vok {
				c.o.writeString(errNotInt)
				return
			}
			if v < 0 {
				c.o.err("entries_added must be positive")
				return
			}
			added = v
		case equalFold(opt, "maxdeletedid") && more:
			v, _, vok := parseStreamID(c.argv[i+1], 0, true, false)
			if !vok {
				c.o.err(errStreamID)
				return
			}
			if id.cmp(v) < 0 {
				c.o.err("The ID specified in XSETID is smaller than the provided max_deleted_entry_id")
				return
			}
			maxDeleted = v
		default:
			c.o.writeString(errSyntax)
			return
		}
	}
	sh, e, ok := c.writeKind(c.argv[1], kindStream, errNoKey)
	defer sh.mu.Unlock()
	if !ok {
		return
	}
	s := e.obj.(*streamObj)
	if n := len(s.entries); n > 0 {
		if id.cmp(s.entries[n-1].id) < 0 {
			c.o.err("The ID specified in XSETID is smaller than the target stream top item")
			return
		}
		if added != -1 && int64(n) > added {
			c.o.err("The entries_added specified in XSETID is smaller than the target stream length")
			return
		}
	}
	s.lastID = id
	if added != -1 {
		s.added = added
	}
	if maxDeleted != (streamID{}) {
		s.maxDeleted = maxDeleted
	}
	// redis-server 7.0.15's XSETID does not signal the key modified: a
	// WATCH of it holds.
	c.o.ok()
}

func cmdXtrim(c *ctx) {
	var a trimArgs
	if _, _, _, _, _, ok := c.parseTrimArgs(&a, false); !ok {
		return
	}
	sh, e, ok := c.writeKind(c.argv[1], kindStream, czero)
	defer sh.mu.Unlock()
	if !ok {
		return
	}
	deleted, freed := e.obj.(*streamObj).trim(&a)
	if deleted > 0 {
		c.s.db.resize(e, e.size-freed)
		sh.modified(c.argv[1])
	}
	c.o.integer(deleted)
}

// cmdXread is XREAD [COUNT count] [BLOCK ms] STREAMS key... id...: the
// entries past each id ("$": the stream's last id) of the streams that
// have some. psp does not block on streams: XREAD BLOCK answers as
// redis-server when an entry is there, and as redis-server inside EXEC
// (a null array), but with an error where redis-server would wait.
func cmdXread(c *ctx) {
	timeout, count := int64(-1), int64(0)
	streamsArg := 0
	argv := c.argv
	for i := 1; i < len(argv); i++ {
		more := len(argv) - i - 1
		o := argv[i]
		switch {
		case equalFold(o, "block") && more > 0:
			i++
			v, ok := string2ll(argv[i])
			if !ok {
				c.o.err("timeout is not an integer or out of range")
				return
			}
			if v < 0 {
				c.o.err("timeout is negative")
				return
			}
			timeout = v
			continue
		case equalFold(o, "count") && more > 0:
			i++
			v, ok := string2ll(argv[i])
			if !ok {
				c.o.writeString(errNotInt)
				return
			}
			count = max(v, 0)
			continue
		case equalFold(o, "streams") && more > 0:
			streamsArg = i + 1
			if (len(argv)-streamsArg)%2 != 0 {
				c.o.err("Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.")
				return
			}
		case equalFold(o, "group") && more >= 2:
			c.o.err("The GROUP option is only supported by XREADGROUP. You called XREAD instead.")
			return
		case equalFold(o, "noack"):
			c.o.err("The NOACK option is only supported by XREADGROUP. You called XREAD instead.")
			return
		default:
			c.o.writeString(errSyntax)
			return
		}
		break
	}
	if streamsArg == 0 {
		c.o.writeString(errSyntax)
		return
	}
	n := (len(argv) - streamsArg) / 2
	keys := argv[streamsArg : streamsArg+n]
	c.lockKeys(keys, false)
	defer c.unlockKeys(false)
	ids := make([]streamID, n)
	streams := make([]*streamObj, n)
	for j, key := range keys {
		sh, _ := c.shardFor(key)
		e := c.lookup(sh, key)
		if c.wrongType(e, kindStream) {
			return
		}
		if e != nil {
			streams[j] = e.obj.(*streamObj)
		}
		p := argv[streamsArg+n+j]
		switch {
		case string(p) == "$":
			if e != nil {
				ids[j] = streams[j].lastID
			}
			continue
		case string(p) == ">":
			c.o.err("The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.")
			return
		}
		id, _, ok := parseStreamID(p, 0, true, false)
		if !ok {
			c.o.err(errStreamID)
			return
		}
		ids[j] = id
	}
	ready := 0
	for j, s := range streams {
		if s != nil && len(s.entries) > 0 && s.entries[len(s.entries)-1].id.cmp(ids[j]) > 0 {
			ready++
		} else {
			streams[j] = nil
		}
	}
	if ready == 0 {
		if timeout != -1 && !c.inExec && c.conn != nil && c.o.r != nil {
			c.o.err("XREAD BLOCK is not supported by psp: it answers only when an entry is there")
			return
		}
		c.o.nullArray()
		return
	}
	if c.o.resp3 {
		c.o.aggregate('%', ready)
	} else {
		c.o.arrayLen(ready)
	}
	for j, s := range streams {
		if s == nil {
			continue
		}
		if !c.o.resp3 {
			c.o.arrayLen(2)
		}
		c.o.bulk(keys[j])
		start := ids[j]
		start.incr()
		c.writeRange(s, start, streamID{math.MaxUint64, math.MaxUint64}, count, false)
	}
}
