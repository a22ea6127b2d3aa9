package redis

import (
	"math"
	"strconv"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/internal/resp"
)

// out is a worker's reply under construction, in RESP2. It fills a chunk
// of at most room bytes; a full chunk leaves at once through the
// dataplane's app.Reply (the reply's leading buffers), and the last one is
// copied into the request's buffer when the command is done. A reply that
// cannot be sent whole (no buffer left, or no app.Reply for a reply longer
// than one buffer) is cut: failed is set, later writes are dropped, and
// the connection is closed after what was sent.
type out struct {
	buf    []byte // the chunk being filled, cap(buf) == room
	r      app.Reply
	room   int
	failed bool
	// resp3: the connection speaks RESP3 (HELLO 3); the helpers below
	// write each shape as redis-server writes it for the protocol.
	resp3 bool
	// silent: the command's reply is not sent (CLIENT REPLY OFF or
	// SKIP): failed is set too, so that every write is dropped, without
	// the cut (silence).
	silent bool
	num    [32]byte
}

// reset prepares o for a reply of chunks of room bytes sent through r (nil:
// the reply must fit one chunk).
func (o *out) reset(r app.Reply, room int) {
	if cap(o.buf) < room || cap(o.buf) > 2*room {
		o.buf = make([]byte, 0, room)
	}
	o.buf, o.r, o.room, o.failed, o.silent = o.buf[:0], r, room, false, false
}

// write appends p to the reply.
func (o *out) write(p []byte) {
	for len(p) > 0 && !o.failed {
		n := copy(o.buf[len(o.buf):o.room], p)
		o.buf = o.buf[:len(o.buf)+n]
		p = p[n:]
		if len(p) > 0 {
			o.flush()
		}
	}
}

func (o *out) writeString(s string) {
	for len(s) > 0 && !o.failed {
		n := copy(o.buf[len(o.buf):o.room], s)
		o.buf = o.buf[:len(o.buf)+n]
		s = s[n:]
		if len(s) > 0 {
			o.flush()
		}
	}
}

// silence drops the writes from now on (on), or writes again; o is not
// cut (failed) when it is called.
func (o *out) silence(on bool) {
	o.silent, o.failed = on, on
}

// flush sends the full chunk as one of the reply's leading buffers.
func (o *out) flush() {
	if o.r == nil || o.r.Send(o.buf) != nil {
		o.failed = true
		return
	}
	o.buf = o.buf[:0]
}

// Reply shapes.

func (o *out) simple(s string) {
	o.writeString("+")
	o.writeString(s)
	o.writeString("\r\n")
}

func (o *out) ok() { o.writeString("+OK\r\n") }

// err writes an error reply: "-ERR " and msg, unless msg carries its own
// code ("-WRONGTYPE ...").
func (o *out) err(msg string) {
	if len(msg) == 0 || msg[0] != '-' {
		o.writeString("-ERR ")
	} else {
		msg = msg[1:]
		o.writeString("-")
	}
	o.writeString(msg)
	o.writeString("\r\n")
}

// errBytes writes an error reply built by the caller (without "-ERR ").
func (o *out) errBytes(msg []byte) {
	o.writeString("-ERR ")
	o.write(msg)
	o.writeString("\r\n")
}

func (o *out) integer(v int64) {
	b := append(o.num[:0], ':')
	b = strconv.AppendInt(b, v, 10)
	b = append(b, '\r', '\n')
	o.write(b)
}

func (o *out) arrayLen(n int) {
	b := append(o.num[:0], '*')
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, '\r', '\n')
	o.write(b)
}

func (o *out) bulkHeader(n int) {
	b := append(o.num[:0], '$')
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, '\r', '\n')
	o.write(b)
}

// bulkRoom is what a bulk string takes beyond its bytes at most: "$",
// its length and two CRLFs.
const bulkRoom = 1 + 20 + 4

func (o *out) bulk(p []byte) {
	if len(o.buf)+len(p)+bulkRoom <= o.room && !o.failed {
		o.buf = resp.AppendBulk(o.buf, p)
		return
	}
	o.bulkHeader(len(p))
	o.write(p)
	o.writeString("\r\n")
}

func (o *out) bulkString(s string) {
	if len(o.buf)+len(s)+bulkRoom <= o.room && !o.failed {
		o.buf = resp.AppendBulk(o.buf, s)
		return
	}
	o.bulkHeader(len(s))
	o.writeString(s)
	o.writeString("\r\n")
}

// bulkInt writes v as a bulk string.
func (o *out) bulkInt(v int64) {
	var b [24]byte
	o.bulk(strconv.AppendInt(b[:0], v, 10))
}

// null writes redis-server's addReplyNull: $-1 in RESP2, _ in RESP3.
func (o *out) null() {
	if o.resp3 {
		o.writeString("_\r\n")
		return
	}
	o.writeString("$-1\r\n")
}

// nullArray writes redis-server's addReplyNullArray: *-1 in RESP2, _ in
// RESP3.
func (o *out) nullArray() {
	if o.resp3 {
		o.writeString("_\r\n")
		return
	}
	o.writeString("*-1\r\n")
}

// shared writes one of the shared replies (command.go's constants), in
// the connection's protocol: the nulls are _ in RESP3, and the empty map
// and set (written %0 and ~0) are *0 in RESP2.
func (o *out) shared(s string) {
	switch s {
	case nullBulk, nullArray:
		if o.resp3 {
			s = "_\r\n"
		}
	case emptyMap, emptySet:
		if !o.resp3 {
			s = emptyArray
		}
	}
	o.writeString(s)
}

// aggregate writes an aggregate's header: prefix and n.
func (o *out) aggregate(prefix byte, n int) {
	b := append(o.num[:0], prefix)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, '\r', '\n')
	o.write(b)
}

// mapLen writes the header of a map of n pairs (addReplyMapLen): an
// array of 2n in RESP2.
func (o *out) mapLen(n int) {
	if o.resp3 {
		o.aggregate('%', n)
		return
	}
	o.arrayLen(2 * n)
}

// setLen writes the header of a set of n members (addReplySetLen).
func (o *out) setLen(n int) {
	if o.resp3 {
		o.aggregate('~', n)
		return
	}
	o.arrayLen(n)
}

// pairs writes the header of n (member, score) or (field, value) pairs
// as redis-server's WITHSCORES and WITHVALUES replies: a flat array of 2n
// in RESP2, an array of n arrays in RESP3, each opened by pair.
func (o *out) pairs(n int) {
	if o.resp3 {
		o.arrayLen(n)
		return
	}
	o.arrayLen(2 * n)
}

// pair opens one pair of pairs' reply (nothing in RESP2).
func (o *out) pair() {
	if o.resp3 {
		o.writeString("*2\r\n")
	}
}

// verbatim writes addReplyVerbatim with the "txt" format: a bulk string
// in RESP2.
func (o *out) verbatim(s string) {
	if !o.resp3 {
		o.bulkString(s)
		return
	}
	o.aggregate('=', len(s)+4)
	o.writeString("txt:")
	o.writeString(s)
	o.writeString("\r\n")
}

// double writes a score as redis-server's addReplyDouble does: a bulk
// string of %.17g, "inf" or "-inf" in RESP2, a double (",") in RESP3.
func (o *out) double(d float64) {
	var b [32]byte
	if o.resp3 {
		p := append(b[:0], ',')
		p = formatDouble(p, d)
		o.write(append(p, '\r', '\n'))
		return
	}
	o.bulk(formatDouble(b[:0], d))
}

// formatDouble appends d as C's printf("%.17g") does (inf and -inf as
// redis-server spells them).
func formatDouble(dst []byte, d float64) []byte {
	switch {
	case math.IsInf(d, 1):
		return append(dst, "inf"...)
	case math.IsInf(d, -1):
		return append(dst, "-inf"...)
	}
	return strconv.AppendFloat(dst, d, 'g', 17, 64)
}
