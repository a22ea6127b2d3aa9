package redis

import (
	"encoding/binary"
	"slices"

	"github.com/persephone-go/psp/app"
)

// Request types. Each command has a type of its own; the commands whose
// cost grows with an argument are typed apart by it, in four sizes (up to
// 100, 1,000, 10,000, more), so that DARC profiles and reserves for them
// separately: SCAN by its COUNT, MGET by its number of keys, LRANGE,
// ZRANGE and ZREVRANGE by their span (a span that depends on the list's
// length, such as 0 -1, and ZRANGE BYSCORE, are the largest size). KEYS is
// a type of its own. The example Wasm classifiers
// examples/classifiers/c/resp.c and examples/classifiers/rust/resp.rs type
// requests the same way; their copies of this table are rewritten from
// TypeNames by examples/classifiers' TestRESPTablesFollowNative
// (PSP_UPDATE_TABLES=1), which fails while they differ.
//
// TypeNames lists the types; ids are their indexes.
func TypeNames() []string { return slices.Clone(typeNames[:]) }

// commandTypes are the commands with a type, in id order from 1.
var commandTypes = [...]string{
	"APPEND", "AUTH", "BITCOUNT", "BITPOS", "BLMOVE", "BLMPOP", "BLPOP", "BRPOP", "BRPOPLPUSH",
	"BZMPOP", "BZPOPMAX", "BZPOPMIN", "CLIENT", "COMMAND", "CONFIG", "COPY", "DBSIZE", "DECR",
	"DECRBY", "DEL", "DISCARD", "ECHO", "EXEC", "EXISTS", "EXPIRE", "EXPIREAT", "EXPIRETIME",
	"FLUSHALL", "FLUSHDB", "FUNCTION", "GET", "GETBIT", "GETDEL", "GETEX", "GETRANGE", "GETSET",
	"HDEL", "HELLO", "HEXISTS", "HGET", "HGETALL", "HINCRBY", "HINCRBYFLOAT", "HKEYS", "HLEN",
	"HMGET", "HMSET", "HRANDFIELD", "HSCAN", "HSET", "HSETNX", "HSTRLEN", "HVALS", "INCR", "INCRBY",
	"INCRBYFLOAT", "INFO", "KEYS", "LCS", "LINDEX", "LINSERT", "LLEN", "LMOVE", "LMPOP", "LPOP",
	"LPOS", "LPUSH", "LPUSHX", "LRANGE", "LREM", "LSET", "LTRIM", "MEMORY", "MGET", "MSET", "MSETNX",
	"MULTI", "OBJECT", "PERSIST", "PEXPIRE", "PEXPIREAT", "PEXPIRETIME", "PING", "PSETEX",
	"PSUBSCRIBE", "PTTL", "PUBLISH", "PUBSUB", "PUNSUBSCRIBE", "QUIT", "RANDOMKEY", "RENAME",
	"RENAMENX", "RESET", "RPOP", "RPOPLPUSH", "RPUSH", "RPUSHX", "SADD", "SCAN", "SCARD", "SDIFF",
	"SDIFFSTORE", "SELECT", "SET", "SETBIT", "SETEX", "SETNX", "SETRANGE", "SINTER", "SINTERCARD",
	"SINTERSTORE", "SISMEMBER", "SMEMBERS", "SMISMEMBER", "SMOVE", "SPOP", "SRANDMEMBER", "SREM",
	"SSCAN", "STRLEN", "SUBSCRIBE", "SUBSTR", "SUNION", "SUNIONSTORE", "TIME", "TOUCH", "TTL", "TYPE",
	"UNLINK", "UNSUBSCRIBE", "UNWATCH", "WATCH", "XADD", "XDEL", "XLEN", "XRANGE", "XREAD",
	"XREVRANGE", "XSETID", "XTRIM", "ZADD", "ZCARD", "ZCOUNT", "ZDIFF", "ZDIFFSTORE", "ZINCRBY", "ZINTER",
	"ZINTERCARD", "ZINTERSTORE", "ZLEXCOUNT", "ZMPOP", "ZMSCORE", "ZPOPMAX", "ZPOPMIN", "ZRANDMEMBER",
	"ZRANGE", "ZRANGEBYLEX", "ZRANGEBYSCORE", "ZRANGESTORE", "ZRANK", "ZREM", "ZREMRANGEBYLEX",
	"ZREMRANGEBYRANK", "ZREMRANGEBYSCORE", "ZREVRANGE", "ZREVRANGEBYLEX", "ZREVRANGEBYSCORE",
	"ZREVRANK", "ZSCAN", "ZSCORE", "ZUNION", "ZUNIONSTORE",
}

// The commands typed apart by size, in id order after commandTypes, each
// followed by its three larger sizes.
var sizedCommands = [...]string{"MGET", "SCAN", "LRANGE", "ZRANGE", "ZREVRANGE"}

var sizeSuffixes = [...]string{"_1K", "_10K", "_BIG"}

// NumTypes is the number of request types, UNKNOWN included.
const NumTypes = 1 + len(commandTypes) + len(sizedCommands)*len(sizeSuffixes)

var typeNames = func() (names [NumTypes]string) {
	names[0] = "UNKNOWN"
	copy(names[1:], commandTypes[:])
	i := 1 + len(commandTypes)
	for _, c := range sizedCommands {
		for _, s := range sizeSuffixes {
			names[i] = c + s
			i++
		}
	}
	return names
}()

// commandType is the type of each command of commandTypes, by name: an
// open-addressed table keyed by the upper-cased name packed in two words,
// which costs less than a map of strings (BenchmarkClassify).
var commandType = newNameTable(commandTypes[:])

// nameTable maps command names of up to maxName bytes to their types.
type nameTable struct {
	slots [nameSlots]nameSlot
}

// nameSlots is a power of two, four times the commands or more, so that
// probes are short.
const (
	nameBits  = 9
	nameSlots = 1 << nameBits
)

// nameSlot is one name (packed, see packName) and its type; t 0: empty.
type nameSlot struct {
	lo, hi uint64
	n      uint8
	t      app.Type
}

func newNameTable(names []string) *nameTable {
	var tab nameTable
	for i, name := range names {
		var b [maxName]byte
		copy(b[:], name)
		lo, hi := packName(&b)
		for j := nameHash(lo, hi, len(name)); ; j = (j + 1) % nameSlots {
			if tab.slots[j].t == app.Unknown {
				tab.slots[j] = nameSlot{lo: lo, hi: hi, n: uint8(len(name)), t: app.Type(1 + i)}
				break
			}
		}
	}
	return &tab
}

// typeOf is lookup for an upper-case name.
func (tab *nameTable) typeOf(name string) app.Type {
	var b [maxName]byte
	return tab.lookup(&b, copy(b[:], name))
}

// sizedBase is the base type of each of sizedCommands.
var sizedBase = func() (x [len(sizedCommands)]app.Type) {
	for i, name := range sizedCommands {
		x[i] = commandType.typeOf(name)
	}
	return x
}()

// packName reads an upper-cased name, zero-padded, as two words.
func packName(b *[maxName]byte) (lo, hi uint64) {
	return binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])
}

func nameHash(lo, hi uint64, n int) int {
	h := (lo ^ hi*0x9e3779b97f4a7c15 ^ uint64(n)) * 0xff51afd7ed558ccd
	return int(h >> (64 - nameBits))
}

// lookup returns the type of the upper-cased name b[:n] (zero-padded
// past n), app.Unknown when it is no command's.
func (tab *nameTable) lookup(b *[maxName]byte, n int) app.Type {
	lo, hi := packName(b)
	for j := nameHash(lo, hi, n); ; j = (j + 1) % nameSlots {
		s := &tab.slots[j]
		if s.t == app.Unknown || (s.lo == lo && s.hi == hi && int(s.n) == n) {
			return s.t
		}
	}
}

// sizedIndex is, by base type, one plus the command's index in
// sizedCommands (0: not typed apart by size).
var sizedIndex = func() (x [1 + len(commandTypes)]int) {
	for i, name := range sizedCommands {
		x[commandType.typeOf(name)] = 1 + i
	}
	return x
}()

// ClassifyPrefix is how much of a request Classify reads: as much as a Wasm
// classifier sees (the classifier ABI's PREFIX, wasmclass.Prefix).
const ClassifyPrefix = 248

// Classifier is the native Redis classifier. It is stateless, safe for
// concurrent use and allocates nothing.
type Classifier struct{}

// ClassifyBatch implements app.Classifier. A request naming its command
// as the one before it in the batch, byte for byte (a pipeline's repeated
// GETs), skips the lookup of the name.
func (Classifier) ClassifyBatch(payloads [][]byte, out []app.Type) {
	var last lastName
	for i, p := range payloads {
		out[i] = classify(p, &last)
	}
}

// lastName is the command name classify looked up last, and its type.
type lastName struct {
	name []byte // nil: none
	t    app.Type
}

// maxName is the longest command name (ZREVRANGEBYSCORE).
const maxName = 16

// Classify types one request (a multibulk request or an inline command)
// from its first ClassifyPrefix bytes.
//
// The command is the first argument, case-insensitively. The arguments
// that size a command are read only when they lie within the prefix: a
// request cut before them (by the prefix, or malformed past its name) is
// given its command's largest size. An argument that is not a number
// where one is expected leaves the base type (the command fails at once).
func Classify(p []byte) app.Type {
	var last lastName
	return classify(p, &last)
}

// classify is Classify, given the name looked up last.
func classify(p []byte, last *lastName) app.Type {
	var a reqArgs
	if !a.init(p) {
		return app.Unknown
	}
	name, ok := a.arg(0)
	if !ok || len(name) == 0 || len(name) > maxName {
		return app.Unknown
	}
	t := last.t
	if last.name == nil || string(name) != string(last.name) {
		var upper [maxName]byte
		for i, c := range name {
			if c >= 'a' && c <= 'z' {
				c -= 'a' - 'A'
			}
			upper[i] = c
		}
		t = commandType.lookup(&upper, len(name)) // app.Unknown when not found
		last.name, last.t = name, t
	}
	if t == app.Unknown {
		return app.Unknown
	}
	if i := sizedIndex[t]; i > 0 {
		switch i - 1 {
		case 0: // MGET
			if a.argc < 0 {
				return sized(0, sizeBig)
			}
			return sized(0, bucket(int64(a.argc-1)))
		case 1: // SCAN
			return sized(1, a.scanSize())
		case 2: // LRANGE
			return sized(2, a.rangeSize(false))
		default: // ZRANGE, ZREVRANGE
			return sized(i-1, a.rangeSize(true))
		}
	}
	return t
}

// Sizes.
const (
	sizeBase = iota
	size1K
	size10K
	sizeBig
)

func bucket(n int64) int {
	switch {
	case n <= 100:
		return sizeBase
	case n <= 1000:
		return size1K
	case n <= 10000:
		return size10K
	}
	return sizeBig
}

// sized is the type of sized command i (in sizedCommands) at size s.
func sized(i, s int) app.Type {
	if s == sizeBase {
		return sizedBase[i]
	}
	return app.Type(1 + len(commandTypes) + i*len(sizeSuffixes) + s - 1)
}

// scanSize reads SCAN's options pairwise from argument 2 on, as
// redis-server does: COUNT's last value sizes it (10 by default).
func (a *reqArgs) scanSize() int {
	count := int64(10)
	for i := 2; ; i += 2 {
		opt, ok := a.arg(i)
		if !ok {
			if a.cut(i) {
				return sizeBig
			}
			return bucket(count)
		}
		val, ok := a.arg(i + 1)
		if !ok {
			if a.cut(i + 1) {
				return sizeBig
			}
			return sizeBase // an option without its value: an error
		}
		switch {
		case foldEqual(opt, "COUNT"):
			n, ok := parseInt(val)
			if !ok || n < 1 {
				return sizeBase
			}
			count = n
		case foldEqual(opt, "MATCH"), foldEqual(opt, "TYPE"):
		default:
			return sizeBase
		}
	}
}

// rangeSize sizes LRANGE, ZRANGE and ZREVRANGE by their span: stop-start+1
// when both indexes have one sign, the largest size when the span depends
// on the length (indexes of both signs) or, for ZRANGE, on scores or
// members (BYSCORE, BYLEX).
func (a *reqArgs) rangeSize(zset bool) int {
	startArg, ok1 := a.arg(2)
	stopArg, ok2 := a.arg(3)
	if !ok1 || !ok2 {
		if a.cut(2) || a.cut(3) {
			return sizeBig
		}
		return sizeBase
	}
	if zset {
		for i := 4; ; i++ {
			opt, ok := a.arg(i)
			if !ok {
				if a.cut(i) {
					return sizeBig
				}
				break
			}
			if foldEqual(opt, "BYSCORE") || foldEqual(opt, "BYLEX") {
				return sizeBig
			}
		}
	}
	start, ok1 := parseInt(startArg)
	stop, ok2 := parseInt(stopArg)
	if !ok1 || !ok2 {
		return sizeBase
	}
	if (start < 0) != (stop < 0) {
		return sizeBig
	}
	return bucket(stop - start + 1)
}

// parseInt parses an optional '-' and 1 to 18 digits.
func parseInt(p []byte) (int64, bool) {
	neg := len(p) > 0 && p[0] == '-'
	if neg {
		p = p[1:]
	}
	if len(p) == 0 || len(p) > 18 {
		return 0, false
	}
	var v int64
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

// foldEqual reports whether p is s (upper case) ignoring ASCII case.
func foldEqual(p []byte, s string) bool {
	if len(p) != len(s) {
		return false
	}
	for i, c := range p {
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// reqArgs reads a request's arguments from its captured prefix, in
// order: argument i is readable when it and those before it lie whole
// within the prefix.
type reqArgs struct {
	p         []byte // the captured prefix
	truncated bool   // the request is longer than p
	inline    bool
	argc      int // arguments (-1: unknown, an inline line cut short)
	// The next argument to read starts at pos; next is its index; bad is
	// set once an argument could not be read.
	pos, next int
	bad       bool
	last      []byte
}

// init starts reading p; it reports false for an empty or malformed
// multibulk head.
func (a *reqArgs) init(p []byte) bool {
	if len(p) > ClassifyPrefix {
		p, a.truncated = p[:ClassifyPrefix], true
	}
	a.p = p
	if len(p) == 0 {
		return false
	}
	if p[0] != '*' {
		a.inline = true
		a.argc = -1
		for i, c := range p {
			if c == '\r' || c == '\n' {
				a.p = p[:i]
				a.truncated = false
				a.argc = countTokens(a.p)
				return true
			}
		}
		if !a.truncated {
			a.argc = countTokens(p)
		}
		return true
	}
	n, end, ok := lengthLine(p, 1)
	if !ok || n < 1 {
		return false
	}
	a.argc, a.pos = int(n), end
	return true
}

// lengthLine reads digits from p[i] up to "\r\n" (1 to 9 digits) and
// returns the number and the index after the line.
func lengthLine(p []byte, i int) (int64, int, bool) {
	var n int64
	j := i
	for j < len(p) && p[j] >= '0' && p[j] <= '9' && j-i < 9 {
		n = n*10 + int64(p[j]-'0')
		j++
	}
	if j == i || j+1 >= len(p) || p[j] != '\r' || p[j+1] != '\n' {
		return 0, 0, false
	}
	return n, j + 2, true
}

func countTokens(line []byte) int {
	n := 0
	for i := 0; i < len(line); {
		for i < len(line) && line[i] == ' ' {
			i++
		}
		if i == len(line) {
			break
		}
		n++
		for i < len(line) && line[i] != ' ' {
			i++
		}
	}
	return n
}

// arg returns argument i (i >= the last one asked for), and false when
// it does not exist or cannot be read within the prefix.
func (a *reqArgs) arg(i int) ([]byte, bool) {
	for a.next <= i && !a.bad {
		if a.argc >= 0 && a.next >= a.argc {
			return nil, false
		}
		if a.inline {
			for a.pos < len(a.p) && a.p[a.pos] == ' ' {
				a.pos++
			}
			start := a.pos
			for a.pos < len(a.p) && a.p[a.pos] != ' ' {
				a.pos++
			}
			if a.pos == start || (a.pos == len(a.p) && a.truncated) {
				a.bad = true // the line ends, or the token may go on past the prefix
				break
			}
			a.last = a.p[start:a.pos]
		} else {
			if a.pos >= len(a.p) || a.p[a.pos] != '$' {
				a.bad = true
				break
			}
			n, end, ok := lengthLine(a.p, a.pos+1)
			if !ok || int64(end)+n+2 > int64(len(a.p)) || a.p[end+int(n)] != '\r' || a.p[end+int(n)+1] != '\n' {
				a.bad = true
				break
			}
			a.last = a.p[end : end+int(n)]
			a.pos = end + int(n) + 2
		}
		a.next++
	}
	if a.bad || a.next != i+1 {
		return nil, false
	}
	return a.last, true
}

// cut reports whether argument i exists but could not be read within the
// prefix (the request is longer, or malformed before it).
func (a *reqArgs) cut(i int) bool {
	if a.argc >= 0 && i >= a.argc {
		return false
	}
	return a.bad
}

var _ app.Classifier = Classifier{}
