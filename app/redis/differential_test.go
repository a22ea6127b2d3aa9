package redis

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/app/redis/redistest"
)

// The differential test sends random command sequences to redis-server
// and to psp and compares every reply byte for byte. Its size and seed
// come from the environment, so that a local run can try far more
// sequences than the suite does:
//
//	PSP_REDIS_DIFF_SEQS   sequences (default 300, 200 in RESP3)
//	PSP_REDIS_DIFF_LEN    commands per sequence (default 30)
//	PSP_REDIS_DIFF_SEED   first seed (default 1); sequence i uses seed+i
//	PSP_REDIS_DIFF_FAILS  mismatches reported before the test stops (default 5)
//	PSP_REDIS_DIFF_KEYS   keys the commands share (default 6)
//	PSP_REDIS_DIFF_PSP    address of a running psp serve --app redis to
//	                      test instead of a server on the test's own
//	                      transport (the TCP dataplane's reads and writes)
//
// Left out of the grammar: SPOP without a count (which member it removes
// is random, so the two keyspaces would differ from there on), QUIT,
// HELLO, CLIENT, COMMAND, CONFIG, INFO and TIME (replies that name the
// server, the connection or the time), the refused commands, and a
// SCAN-family cursor other than 0 that names a place in redis-server's
// hash table (its reply is only checked to be a cursor and a list).
// Replies redis-server leaves to chance or to its hash tables are
// compared by a normalisation that stays strict (diffCheck).
func diffEnv(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return n
}

// TestDifferentialRandom: seeded random command sequences over six keys,
// well-formed and malformed, each sent to redis-server and to psp after
// FLUSHALL; a mismatch is reported with the shortest sequence found that
// still shows it.
func TestDifferentialRandom(t *testing.T) { diffRandom(t, false, false, 300) }

// TestDifferentialRandomRESP3 is TestDifferentialRandom on connections
// that sent HELLO 3 first: every reply in RESP3.
func TestDifferentialRandomRESP3(t *testing.T) { diffRandom(t, true, false, 200) }

// TestDifferentialWatch is TestDifferentialRandom with a second
// connection to each server that watches every key before each command
// and sends MULTI, PING and EXEC after it: EXEC's reply, the null array or
// PONG's, says whether the command modified a key as redis-server counts
// it (where it calls signalModifiedKey, and the deletion of an expired
// key).
func TestDifferentialWatch(t *testing.T) { diffRandom(t, false, true, 150) }

// TestDifferentialStreams is TestDifferentialRandom on streams: the
// stream commands and the key commands, over three keys so that the
// commands meet on the same streams, in RESP2 and RESP3 and watched.
func TestDifferentialStreams(t *testing.T) {
	names := []string{"XADD", "XADD", "XADD", "XLEN", "XRANGE", "XREVRANGE", "XDEL", "XTRIM", "XREAD",
		"TYPE", "DEL", "EXISTS", "COPY", "RENAME", "EXPIRE", "SET"}
	t.Run("RESP2", func(t *testing.T) { diffRandom(t, false, false, 150, names...) })
	t.Run("RESP3", func(t *testing.T) { diffRandom(t, true, false, 100, names...) })
	t.Run("watch", func(t *testing.T) { diffRandom(t, false, true, 80, names...) })
}

// diffRandom runs defSeqs random sequences (PSP_REDIS_DIFF_SEQS), of the
// commands names only when given.
func diffRandom(t *testing.T, resp3, watch bool, defSeqs int, names ...string) {
	seqs := diffEnv(t, "PSP_REDIS_DIFF_SEQS", defSeqs)
	n := diffEnv(t, "PSP_REDIS_DIFF_LEN", 30)
	seed := int64(diffEnv(t, "PSP_REDIS_DIFF_SEED", 1))
	maxFails := diffEnv(t, "PSP_REDIS_DIFF_FAILS", 5)
	keys := diffEnv(t, "PSP_REDIS_DIFF_KEYS", 6)
	if names != nil {
		keys = min(keys, 3)
	}
	real, psp := redistest.StartRedis(t), diffPSP(t)
	d := newDiffPair(t, real, psp)
	if resp3 {
		d.hello3()
	}
	if watch {
		d.watchKeys = []string{"WATCH", ""} // key() is now and then ""
		for i := range keys {
			d.watchKeys = append(d.watchKeys, "k"+strconv.Itoa(i))
		}
		d.watcher = newDiffPair(t, real, psp)
	}
	fails, cmds := 0, 0
	for i := 0; i < seqs && fails < maxFails; i++ {
		g := &diffGen{r: rand.New(rand.NewSource(seed + int64(i))), nkeys: keys, names: names}
		seq := make([][]string, n)
		for j := range seq {
			seq[j] = g.command()
			if watch && j > 0 && g.chance(0.3) {
				// The same command again: the second often changes
				// nothing (SADD of members there, DEL of a key gone),
				// which must not fail a watcher's EXEC.
				seq[j] = slices.Clone(seq[j-1])
			}
		}
		at, msg := d.run(seq)
		cmds += n
		if at < 0 {
			continue
		}
		fails++
		min := d.minimize(seq[:at+1])
		_, msg = d.run(min)
		t.Errorf("seed %d, command %d: %s\nshortest sequence found:\n%s", seed+int64(i), at, msg, diffFormat(min))
	}
	t.Logf("%d sequences, %d commands, seeds %d..%d", seqs, cmds, seed, seed+int64(seqs)-1)
}

// diffPSP returns the address of the psp server under test.
func diffPSP(t *testing.T) string {
	if addr := os.Getenv("PSP_REDIS_DIFF_PSP"); addr != "" {
		return addr
	}
	return serveTest(t, openTest(t, Config{}))
}

// diffPair is a connection to each server.
type diffPair struct {
	t    *testing.T
	real *redistest.Conn
	psp  *redistest.Conn
	// lingering: keys SET with an EXAT or PXAT of this sequence, which
	// may be expired and not yet deleted (see check's DBSIZE).
	lingering map[string]bool
	// watcher, when not nil, sends watchKeys (WATCH and every key)
	// before each command, and MULTI, PING, EXEC after it.
	watcher   *diffPair
	watchKeys []string
}

func newDiffPair(t *testing.T, real, psp string) *diffPair {
	t.Helper()
	d := &diffPair{t: t}
	var err error
	if d.real, err = redistest.Dial(real); err != nil {
		t.Fatalf("dial redis-server: %v", err)
	}
	t.Cleanup(func() { d.real.Close() })
	if d.psp, err = redistest.Dial(psp); err != nil {
		t.Fatalf("dial psp: %v", err)
	}
	t.Cleanup(func() { d.psp.Close() })
	return d
}

// hello3 switches both connections to RESP3.
func (d *diffPair) hello3() {
	d.t.Helper()
	for _, c := range []*redistest.Conn{d.real, d.psp} {
		if r, err := c.Do("HELLO", "3"); err != nil || len(r) == 0 || r[0] != '%' {
			d.t.Fatalf("HELLO 3: %q, %v", r, err)
		}
	}
}

// do sends args to both servers and returns their replies.
func (d *diffPair) do(args []string) (real, psp []byte) {
	d.t.Helper()
	real, err := d.real.Do(args...)
	if err != nil {
		d.t.Fatalf("%q: redis-server: %v", args, err)
	}
	psp, err = d.psp.Do(args...)
	if err != nil {
		d.t.Fatalf("%q: psp: %v (redis-server answered %q)", args, err, real)
	}
	return real, psp
}

// diffInline first in a generated command sends the rest as an inline
// command, each argument quoted (with \xNN escapes for the bytes that
// need them), rather than as a multibulk request.
const diffInline = "\x00inline"

// inlineCommand quotes args into one inline command line.
func inlineCommand(args []string) []byte {
	var b []byte
	for i, a := range args {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, '"')
		for _, c := range []byte(a) {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c >= 0x20 && c < 0x7f:
				b = append(b, c)
			default:
				b = fmt.Appendf(b, "\\x%02x", c)
			}
		}
		b = append(b, '"')
	}
	return append(b, "\r\n"...)
}

// doInline sends args to both servers as an inline command and returns
// their replies.
func (d *diffPair) doInline(args []string) (real, psp []byte) {
	d.t.Helper()
	line := inlineCommand(args)
	for i, c := range []*redistest.Conn{d.real, d.psp} {
		if err := c.Send(line); err != nil {
			d.t.Fatalf("%q: send: %v", line, err)
		}
		b, err := c.Read(1)
		if err != nil {
			d.t.Fatalf("%q: server %d: %v (%q)", line, i, err, b)
		}
		if i == 0 {
			real = b
		} else {
			psp = b
		}
	}
	return real, psp
}

// run flushes both servers and sends seq; it returns the index of the
// first command whose replies differ (-1: none) and what differs.
func (d *diffPair) run(seq [][]string) (int, string) {
	d.t.Helper()
	d.do([]string{"FLUSHALL"})
	d.lingering = map[string]bool{}
	for i, args := range seq {
		var real, psp []byte
		if d.lexUndefined(slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == diffInline })) {
			continue
		}
		if d.watcher != nil {
			if r, p := d.watcher.do(d.watchKeys); !bytes.Equal(r, p) {
				return i, fmt.Sprintf("WATCH: psp %q, redis-server %q", p, r)
			}
		}
		if args[0] == diffInline {
			args = args[1:]
			real, psp = d.doInline(args)
		} else {
			real, psp = d.do(args)
		}
		if d.watcher != nil {
			d.watcher.do([]string{"MULTI"})
			d.watcher.do([]string{"PING"})
			if r, p := d.watcher.do([]string{"EXEC"}); !bytes.Equal(r, p) {
				return i, fmt.Sprintf("%q: EXEC of a client watching every key: psp %q, redis-server %q", args, p, r)
			}
		}
		if strings.EqualFold(args[0], "set") && len(args) > 1 && slices.ContainsFunc(args, func(a string) bool {
			return strings.EqualFold(a, "exat") || strings.EqualFold(a, "pxat")
		}) {
			d.lingering[args[1]] = true
		}
		if msg := d.check(args, real, psp); msg != "" {
			return i, msg
		}
	}
	return -1, ""
}

// minimize drops the commands before the last one that the mismatch
// does not need, one at a time, while the last command still shows one.
func (d *diffPair) minimize(seq [][]string) [][]string {
	for i := len(seq) - 2; i >= 0; i-- {
		try := slices.Delete(slices.Clone(seq), i, i+1)
		if at, _ := d.run(try); at == len(try)-1 {
			seq = try
		}
	}
	return seq
}

func diffFormat(seq [][]string) string {
	var b strings.Builder
	for _, args := range seq {
		if args[0] == diffInline {
			b.WriteString("(inline) ")
			args = args[1:]
		}
		for i, a := range args {
			if i > 0 {
				b.WriteByte(' ')
			}
			if a == "" || strings.ContainsAny(a, " \"\\'") || strconv.Quote(a) != `"`+a+`"` {
				a = strconv.Quote(a)
			}
			b.WriteString(a)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// check compares the replies to args: byte for byte, but for the
// replies redis-server leaves to chance, its hash tables or the clock,
// which are compared by what is certain of them. It returns "" when they
// agree, else what differs.
func (d *diffPair) check(args []string, real, psp []byte) string {
	differ := func(why string) string {
		return fmt.Sprintf("%q: %s\npsp:          %q\nredis-server: %q", args, why, psp, real)
	}
	if bytes.Equal(real, psp) {
		return ""
	}
	if real[0] == '-' || psp[0] == '-' || real[0] != psp[0] {
		return differ("replies differ")
	}
	name := strings.ToLower(args[0])
	switch name {
	case "command":
		if len(args) == 2 && (strings.EqualFold(args[1], "info") || strings.EqualFold(args[1], "docs") ||
			strings.EqualFold(args[1], "count")) {
			return "" // every command: psp has fewer than redis-server
		}
	case "keys":
		if !bytes.Equal(redistest.SortedReply(real), redistest.SortedReply(psp)) {
			return differ("keys differ")
		}
		return ""
	case "smembers", "hkeys", "hvals":
		// In order while redis-server holds an intset or a listpack,
		// in its hash table's order once it holds a hash table.
		if d.hashTable(args[1]) && bytes.Equal(redistest.SortedReply(real), redistest.SortedReply(psp)) {
			return ""
		}
		return differ("members differ")
	case "hgetall":
		if d.hashTable(args[1]) && slices.Equal(sortedPairs(real), sortedPairs(psp)) {
			return ""
		}
		return differ("fields differ")
	case "spop": // with a count (the grammar has no SPOP without one): all members
		if !bytes.Equal(redistest.SortedReply(real), redistest.SortedReply(psp)) {
			return differ("members differ")
		}
		return ""
	case "scan", "sscan", "hscan", "zscan":
		return d.checkScan(args, real, psp, differ)
	case "srandmember":
		return d.checkRandom(args, real, psp, differ)
	case "zrandmember", "hrandfield":
		return d.checkRandomPairs(args, real, psp, differ)
	case "randomkey":
		if r, p := d.do([]string{"EXISTS", string(bulkBody(psp))}); !bytes.Equal(p, []byte(":1\r\n")) || !bytes.Equal(r, p) {
			return differ("psp's random key is not a key of both")
		}
		return ""
	case "dbsize":
		// A key SET already expired (EXAT or PXAT in the past) counts
		// until a command reads it or the server's sweep deletes it,
		// which happens at a time of each server's own.
		r, p := d.do([]string{"KEYS", "*"})
		live := len(replyElems(r))
		if !bytes.Equal(redistest.SortedReply(r), redistest.SortedReply(p)) {
			return differ("keys differ")
		}
		a, _ := strconv.Atoi(string(real[1 : len(real)-2]))
		b, _ := strconv.Atoi(string(psp[1 : len(psp)-2]))
		if a < live || b < live || a > live+len(d.lingering) || b > live+len(d.lingering) {
			return differ("numbers of keys differ")
		}
		return ""
	case "sinter", "sunion", "sdiff":
		// Ascending while the result (SUNION, SDIFF) or the set read
		// (SINTER, SDIFF's first) is an intset, in redis-server's hash
		// table's order otherwise.
		if bytes.Equal(redistest.SortedReply(real), redistest.SortedReply(psp)) &&
			(!intsetReply(real) || (name != "sunion" && slices.ContainsFunc(args[1:], d.hashTable))) {
			return ""
		}
		return differ("members differ")
	case "ttl", "pttl", "expiretime", "pexpiretime":
		a, errA := strconv.ParseInt(string(real[1:len(real)-2]), 10, 64)
		b, errB := strconv.ParseInt(string(psp[1:len(psp)-2]), 10, 64)
		tol := int64(1)
		if name == "pttl" || name == "pexpiretime" {
			tol = 1000
		}
		if errA != nil || errB != nil || a < 0 || b < 0 || a-b > tol || b-a > tol {
			return differ("times to live differ")
		}
		return ""
	case "expire", "pexpire", "expireat", "pexpireat":
		// GT and LT compare the new expiry with the old to the
		// millisecond: the same relative time set twice is greater
		// when a millisecond has passed in between, on either server.
		for _, a := range args[3:] {
			if (strings.EqualFold(a, "gt") || strings.EqualFold(a, "lt")) && real[0] == ':' {
				return ""
			}
		}
	}
	return differ("replies differ")
}

// hashTable reports whether redis-server holds key as a hash table (its
// members in an order of its own), a sorted set's as a skip list and a
// hash table, which SCANs in its own order.
func (d *diffPair) hashTable(key string) bool {
	d.t.Helper()
	enc, err := d.real.Do("OBJECT", "ENCODING", key)
	if err != nil {
		d.t.Fatalf("OBJECT ENCODING: %v", err)
	}
	return string(bulkBody(enc)) == "hashtable" || string(bulkBody(enc)) == "skiplist"
}

// intsetReply reports whether the array reply p could be an intset's
// members: at most 512 integers, each as redis-server writes one,
// ascending.
func intsetReply(p []byte) bool {
	elems := replyElems(p)
	if len(elems) > 512 {
		return false
	}
	prev := int64(0)
	for i, e := range elems {
		b := bulkBody(e)
		v, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil || strconv.FormatInt(v, 10) != string(b) || (i > 0 && v <= prev) {
			return false
		}
		prev = v
	}
	return true
}

// flatElems is replyElems with RESP3's pairs (arrays of two) spread out,
// as RESP2 sends them.
func flatElems(p []byte) [][]byte {
	var out [][]byte
	for _, e := range replyElems(p) {
		if len(e) > 0 && e[0] == '*' {
			out = append(out, replyElems(e)...)
			continue
		}
		out = append(out, e)
	}
	return out
}

// sortedPairs is an array reply's elements two by two, sorted.
func sortedPairs(p []byte) []string {
	elems := flatElems(p)
	var out []string
	for i := 0; i+1 < len(elems); i += 2 {
		out = append(out, string(elems[i])+string(elems[i+1]))
	}
	slices.Sort(out)
	return out
}

// bulkBody is a bulk reply's bytes.
func bulkBody(p []byte) []byte {
	i := bytes.IndexByte(p, '\n')
	if p[0] != '$' || i < 0 || len(p) < i+3 {
		return nil
	}
	return p[i+1 : len(p)-2]
}

// replyElems splits an array reply into its elements (nil: not an array).
func replyElems(p []byte) [][]byte {
	if len(p) == 0 || (p[0] != '*' && p[0] != '~' && p[0] != '%') {
		return nil
	}
	r := bufio.NewReader(bytes.NewReader(p))
	_, _ = r.ReadBytes('\n')
	elems := [][]byte{}
	for {
		e, err := redistest.ReadReply(r)
		if err != nil {
			return elems
		}
		elems = append(elems, e)
	}
}

// checkScan: a scan from cursor 0 is run to its end on each server, and
// the sets of what each returned (field and value pairs for HSCAN and
// ZSCAN) must be equal. A scan from another cursor starts at a place of
// redis-server's hash table: both must answer a cursor and a list.
func (d *diffPair) checkScan(args []string, real, psp []byte, differ func(string) string) string {
	ci := 1
	if !strings.EqualFold(args[0], "scan") {
		ci = 2
	}
	re, pe := replyElems(real), replyElems(psp)
	if len(re) != 2 || len(pe) != 2 || re[0][0] != '$' || pe[0][0] != '$' || re[1][0] != '*' || pe[1][0] != '*' {
		return differ("replies differ")
	}
	if args[ci] != "0" {
		return ""
	}
	if ci == 2 && !d.hashTable(args[1]) {
		return differ("replies differ") // a listpack or an intset is sent whole, in order
	}
	pairs := ci == 2 && !strings.EqualFold(args[0], "sscan")
	all := func(first [][]byte, conn *redistest.Conn) ([]string, error) {
		seen := map[string]bool{}
		page := first
		for i := 0; ; i++ {
			elems := replyElems(page[1])
			step := 1
			if pairs {
				step = 2
			}
			for j := 0; j+step <= len(elems); j += step {
				seen[string(bytes.Join(elems[j:j+step], nil))] = true
			}
			cursor := string(bulkBody(page[0]))
			if cursor == "0" || i > 1000 {
				break
			}
			next := slices.Clone(args)
			next[ci] = cursor
			b, err := conn.Do(next...)
			if err != nil {
				return nil, err
			}
			if page = replyElems(b); len(page) != 2 {
				return nil, fmt.Errorf("%q answered %q", next, b)
			}
		}
		keys := make([]string, 0, len(seen))
		for k := range seen {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return keys, nil
	}
	a, err := all(re, d.real)
	if err != nil {
		return differ("redis-server's scan: " + err.Error())
	}
	b, err := all(pe, d.psp)
	if err != nil {
		return differ("psp's scan: " + err.Error())
	}
	if !slices.Equal(a, b) && !(ci == 1 && d.onlyLingering(a, b, args)) {
		return differ(fmt.Sprintf("scans differ: psp %q, redis-server %q", b, a))
	}
	return ""
}

// onlyLingering reports whether the keys a and b of a SCAN ... TYPE none
// differ by keys that may have expired, which it returns until the
// server's own sweep deletes them.
func (d *diffPair) onlyLingering(a, b []string, args []string) bool {
	none := false
	for i := 2; i+1 < len(args); i++ {
		none = none || (strings.EqualFold(args[i], "type") && strings.EqualFold(args[i+1], "none"))
	}
	if !none {
		return false
	}
	in := func(x string, set []string) bool { return slices.Contains(set, x) }
	for _, set := range [2][2][]string{{a, b}, {b, a}} {
		for _, k := range set[0] {
			if !in(k, set[1]) && !d.lingering[string(bulkBody([]byte(k)))] {
				return false
			}
		}
	}
	return true
}

// checkRandom: SRANDMEMBER's picks are members of the set (as both
// servers hold it), as many as redis-server picked, distinct for a
// positive count.
func (d *diffPair) checkRandom(args []string, real, psp []byte, differ func(string) string) string {
	r, p := d.do([]string{"SMEMBERS", args[1]})
	if !bytes.Equal(redistest.SortedReply(r), redistest.SortedReply(p)) {
		return differ("the sets differ")
	}
	members := map[string]bool{}
	for _, e := range replyElems(p) {
		members[string(e)] = true
	}
	if real[0] == '$' {
		if !members[string(psp)] {
			return differ("psp's pick is not a member")
		}
		return ""
	}
	re, pe := replyElems(real), replyElems(psp)
	if len(re) != len(pe) {
		return differ("numbers of picks differ")
	}
	distinct := !strings.HasPrefix(args[2], "-")
	seen := map[string]bool{}
	for _, e := range pe {
		if !members[string(e)] || (distinct && seen[string(e)]) {
			return differ("psp's picks are not distinct members")
		}
		seen[string(e)] = true
	}
	return ""
}

// checkRandomPairs: ZRANDMEMBER's and HRANDFIELD's picks are members
// (fields) of the key, with their scores (values) when asked for, as many
// as redis-server picked, distinct for a positive count, in redis-server's
// order when the count takes them all.
func (d *diffPair) checkRandomPairs(args []string, real, psp []byte, differ func(string) string) string {
	all := []string{"ZRANGE", args[1], "0", "-1", "WITHSCORES"}
	if strings.EqualFold(args[0], "hrandfield") {
		all = []string{"HGETALL", args[1]}
	}
	r, p := d.do(all)
	if !slices.Equal(sortedPairs(r), sortedPairs(p)) {
		return differ("the keys differ")
	}
	pairs := map[string]string{}
	elems := flatElems(p)
	for i := 0; i+1 < len(elems); i += 2 {
		pairs[string(elems[i])] = string(elems[i+1])
	}
	if real[0] == '$' {
		if _, ok := pairs[string(psp)]; !ok {
			return differ("psp's pick is not a member")
		}
		return ""
	}
	with := len(args) == 4
	re, pe := flatElems(real), flatElems(psp)
	if len(re) != len(pe) {
		return differ("numbers of picks differ")
	}
	if n, err := strconv.ParseInt(args[2], 10, 64); err == nil && n >= int64(len(pairs)) &&
		(strings.EqualFold(args[0], "zrandmember") || !d.hashTable(args[1])) {
		// The whole key: a sorted set from its highest member, a small
		// hash in its fields' order.
		return differ("replies differ")
	}
	step := 1
	if with {
		step = 2
	}
	distinct := !strings.HasPrefix(args[2], "-")
	seen := map[string]bool{}
	for i := 0; i+step <= len(pe); i += step {
		v, ok := pairs[string(pe[i])]
		if !ok || (distinct && seen[string(pe[i])]) || (with && v != string(pe[i+1])) {
			return differ("psp's picks are not distinct members with their scores")
		}
		seen[string(pe[i])] = true
	}
	return ""
}

// lexUndefined reports whether args is a lex range command on a sorted
// set redis-server holds as a skip list whose members do not all have one
// score: the range is then found through the skip list's levels, drawn at
// random by each server.
func (d *diffPair) lexUndefined(args []string) bool {
	name := strings.ToLower(args[0])
	key := 1
	switch name {
	case "zrangebylex", "zrevrangebylex", "zlexcount", "zremrangebylex":
	case "zrange", "zrangestore":
		if name == "zrangestore" {
			key = 2
		}
		if !slices.ContainsFunc(args, func(a string) bool { return strings.EqualFold(a, "bylex") }) {
			return false
		}
	default:
		return false
	}
	if len(args) <= key || !d.hashTable(args[key]) {
		return false
	}
	r, err := d.real.Do("ZRANGE", args[key], "0", "-1", "WITHSCORES")
	if err != nil {
		d.t.Fatalf("ZRANGE: %v", err)
	}
	elems := replyElems(r)
	for i := 3; i < len(elems); i += 2 {
		if string(elems[i]) != string(elems[1]) {
			return true
		}
	}
	return false
}

// diffGen generates commands from the grammar of psp's commands.
type diffGen struct {
	r     *rand.Rand
	nkeys int      // keys k0, k1, ...
	names []string // the commands to pick from (nil: diffNames)
}

func (g *diffGen) pick(s ...string) string { return s[g.r.Intn(len(s))] }
func (g *diffGen) chance(p float64) bool   { return g.r.Float64() < p }

// word is a keyword in a random case.
func (g *diffGen) word(w string) string {
	switch g.r.Intn(4) {
	case 0:
		return strings.ToLower(w)
	case 1:
		b := []byte(w)
		for i := range b {
			if g.chance(0.5) {
				b[i] ^= 0x20 * byte(boolInt(b[i] >= 'A' && b[i] <= 'Z' || b[i] >= 'a' && b[i] <= 'z'))
			}
		}
		return string(b)
	}
	return strings.ToUpper(w)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (g *diffGen) key() string {
	if g.chance(0.01) {
		return ""
	}
	return "k" + strconv.Itoa(g.r.Intn(g.nkeys))
}

func (g *diffGen) keys(min int) []string {
	n := min + g.r.Intn(3)
	out := make([]string, n)
	for i := range out {
		out[i] = g.key()
	}
	return out
}

var (
	diffInts = []string{"0", "1", "-1", "2", "3", "5", "10", "-2", "-5", "100", "-100",
		"9223372036854775807", "-9223372036854775808", "9223372036854775808", "-9223372036854775809",
		"18446744073709551615", "4294967296", "2147483648", "-2147483649", "-0", "+1", "01", " 1", "1 ",
		"1.0", "1e3", "0x10", "", "abc", "1e400", "inf", "nan", "00", "-01", "+0"}
	diffFloats = []string{"0", "1", "-1", "1.5", "-2.5", "0.1", "3", "2", "1e3", "1e-3", "1e400", "-1e400",
		"1e-400", "inf", "-inf", "+inf", "Infinity", "-infinity", "nan", "-nan", "-0", "+0", "0x10", "1.5e",
		"abc", "", " 1", "1 ", ".5", "5.", "1e308", "-1.7976931348623157e308", "9223372036854775807",
		"0.30000000000000004", "1_0", "10", "-10", "3.0", "1E2", "0.0", "-0.0", "17179869184", "1.23456789012345678",
		"5e-324", "4.9e-324", "1e-320", "-1e-310", "1.7976931348623157e308", "-1e308", "1e17", "1.5e300",
		"123456789012345678", "0.5", "-0.5", "100000000000000000000", "1e", "e1", "--1", "1e+2", "1.", "nan(1)"}
	diffRangeScores = []string{"(1", "(-inf", "(+inf", "(inf", "(", "((1", "(abc", "(1.5", "-inf", "+inf",
		"(-1", "(3", "(0", "( 1", "(nan"}
	diffValues = []string{"v", "a", "b", "1", "-1", "0", "10", "3.5", "abc", "", "9223372036854775807",
		"-9223372036854775808", "1e400", "inf", "nan", " 1", "01", "\x00\xff", "a\r\nb", "hello world",
		"-0", "2", "x"}
	diffMembers = []string{"a", "b", "c", "1", "2", "-1", "10", "", "0", "x y", "\x00", "9223372036854775807",
		"-9223372036854775808", "9223372036854775808", "01", "-0", "+1", " 1", "3"}
	diffFields  = []string{"f0", "f1", "f2", "1", ""}
	diffSeconds = []string{"100", "1000", "0", "-1", "-100", "x", "", "9223372036854775807",
		"9223372036854775", "9223372036854776", "1e3", "4294967296", "2147483648", "-9223372036854775808", "1.5", "10000"}
	diffMillis = []string{"100000", "1000000", "0", "-1", "x", "", "9223372036854775807",
		"9223372036854775", "-9223372036854775808", "1.5", "10000000", "4294967296"}
	// Absolute times: long past, and late this century.
	diffUnix    = []string{"1", "1000000000", "4102444800", "4102444900", "0", "-1", "x", "9223372036854775807", "9223372036854775"}
	diffUnixMs  = []string{"1", "1000000000000", "4102444800000", "4102444900000", "0", "-1", "x", "9223372036854775807"}
	diffIndexes = []string{"0", "1", "-1", "2", "-2", "3", "5", "-100", "100", "x", "", "9223372036854775807",
		"-9223372036854775808", "1.0", "4294967296", "-4294967296", "10"}
	// Bit offsets: within a few bytes, past a string's end, and past
	// the longest string (not just below it: a string of 512 MB).
	diffBitOffsets = []string{"0", "1", "7", "8", "9", "15", "23", "31", "63", "100", "1000", "-1", "x", "",
		"4294967296", "9223372036854775807", "01", "+1", "1.0"}
	diffRanks    = []string{"1", "2", "-1", "-2", "3", "0", "x", "9223372036854775807", "-9223372036854775808", "-9223372036854775807"}
	diffOffsets  = []string{"0", "1", "3", "10", "-1", "x", "536870912", "4294967296", "9223372036854775807", "2", "5"}
	diffPatterns = []string{"*", "k*", "k[0-2]", "?1", "k\\1", "[^k]*", "*[", "k[", "[a-", "\\", "", "**",
		"k[2-0]", "f*", "a*", "[ab]", "*1", "k?"}
	diffTypes = []string{"string", "list", "hash", "set", "zset", "STRING", "none", "stream", "x"}
	diffJunk  = []string{"x", "", "1", "-1", "NX", "XX", "GT", "LT", "CH", "INCR", "EX", "PX", "GET",
		"WITHSCORES", "LIMIT", "REV", "BYSCORE", "BYLEX", "COUNT", "MATCH", "TYPE", "KEEPTTL", "PERSIST", "\x00"}
)

func (g *diffGen) value() string {
	if g.chance(0.02) {
		return strings.Repeat("x", 65)
	}
	return g.pick(diffValues...)
}

func (g *diffGen) num() string   { return g.pick(diffInts...) }
func (g *diffGen) float() string { return g.pick(diffFloats...) }
func (g *diffGen) index() string { return g.pick(diffIndexes...) }

// member and field are now and then longer than redis-server's compact
// encodings hold (64 bytes), which changes the encoding for good.
func (g *diffGen) member() string {
	if g.chance(0.01) {
		return strings.Repeat("m", 65)
	}
	return g.pick(diffMembers...)
}

func (g *diffGen) field() string {
	if g.chance(0.01) {
		return strings.Repeat("f", 65)
	}
	return g.pick(diffFields...)
}
func (g *diffGen) pattern() string { return g.pick(diffPatterns...) }

// score is a ZADD score or a range bound.
func (g *diffGen) score(bound bool) string {
	if bound && g.chance(0.4) {
		return g.pick(diffRangeScores...)
	}
	return g.float()
}

// expiry is an expiry option and its argument, of SET or GETEX.
func (g *diffGen) expiry() []string {
	switch g.r.Intn(4) {
	case 0:
		return []string{g.word("EX"), g.pick(diffSeconds...)}
	case 1:
		return []string{g.word("PX"), g.pick(diffMillis...)}
	case 2:
		return []string{g.word("EXAT"), g.pick(diffUnix...)}
	}
	return []string{g.word("PXAT"), g.pick(diffUnixMs...)}
}

// options picks some of opts, each a keyword and its arguments, in a
// random order, now and then one twice.
func (g *diffGen) options(p float64, opts ...func() []string) []string {
	var out []string
	for _, i := range g.r.Perm(len(opts)) {
		if g.chance(p) {
			out = append(out, opts[i]()...)
			if g.chance(0.05) {
				out = append(out, opts[i]()...)
			}
		}
	}
	return out
}

func (g *diffGen) flag(w string) func() []string {
	return func() []string { return []string{g.word(w)} }
}

func (g *diffGen) scanOpts(withType bool) []string {
	opts := []func() []string{
		func() []string { return []string{g.word("MATCH"), g.pattern()} },
		func() []string { return []string{g.word("COUNT"), g.pick("1", "2", "10", "0", "-1", "x", "100", "")} },
	}
	if withType {
		opts = append(opts, func() []string { return []string{g.word("TYPE"), g.pick(diffTypes...)} })
	}
	return g.options(0.3, opts...)
}

func (g *diffGen) cursor() string {
	if g.chance(0.9) {
		return "0"
	}
	return g.pick("x", "-1", "18446744073709551616", "", " 0", "00", "1", "18446744073709551615")
}

func (g *diffGen) pairs(first func() string, second func() string) []string {
	n := 1 + g.r.Intn(3)
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, first(), second())
	}
	return out
}

func (g *diffGen) many(f func() string) []string {
	n := 1 + g.r.Intn(3)
	out := make([]string, n)
	for i := range out {
		out[i] = f()
	}
	return out
}

// diffGrammar is every command psp serves that the test sends (see
// above for those left out), as functions of the generator.
var diffGrammar = map[string]func(g *diffGen) []string{
	// Connection and server.
	"PING":      func(g *diffGen) []string { return g.many(g.value)[:g.r.Intn(2)] },
	"ECHO":      func(g *diffGen) []string { return []string{g.value()} },
	"SELECT":    func(g *diffGen) []string { return []string{g.pick("0", "1", "-1", "x", "2147483648", "00", "-0")} },
	"DBSIZE":    func(g *diffGen) []string { return nil },
	"FLUSHDB":   func(g *diffGen) []string { return g.options(0.1, g.flag("SYNC"), g.flag("ASYNC")) },
	"NOSUCH":    func(g *diffGen) []string { return g.many(g.value) },
	"RANDOMKEY": func(g *diffGen) []string { return nil },
	"COMMAND": func(g *diffGen) []string {
		sub := g.word(g.pick("INFO", "DOCS", "COUNT", "INFO", "DOCS"))
		out := []string{sub}
		for n := g.r.Intn(3); n >= 0; n-- {
			out = append(out, g.word(g.pick(diffCommandNames...)))
		}
		return out
	},
	// Keys.
	"DEL":    func(g *diffGen) []string { return g.keys(1) },
	"UNLINK": func(g *diffGen) []string { return g.keys(1) },
	"EXISTS": func(g *diffGen) []string { return g.keys(1) },
	"TOUCH":  func(g *diffGen) []string { return g.keys(1) },
	"TYPE":   func(g *diffGen) []string { return []string{g.key()} },
	"EXPIRE": func(g *diffGen) []string {
		return append([]string{g.key(), g.pick(diffSeconds...)}, g.expireOpts()...)
	},
	"PEXPIRE": func(g *diffGen) []string {
		return append([]string{g.key(), g.pick(diffMillis...)}, g.expireOpts()...)
	},
	"EXPIREAT": func(g *diffGen) []string {
		return append([]string{g.key(), g.pick(diffUnix...)}, g.expireOpts()...)
	},
	"PEXPIREAT": func(g *diffGen) []string {
		return append([]string{g.key(), g.pick(diffUnixMs...)}, g.expireOpts()...)
	},
	"TTL":      func(g *diffGen) []string { return []string{g.key()} },
	"PTTL":     func(g *diffGen) []string { return []string{g.key()} },
	"PERSIST":  func(g *diffGen) []string { return []string{g.key()} },
	"RENAME":   func(g *diffGen) []string { return []string{g.key(), g.key()} },
	"RENAMENX": func(g *diffGen) []string { return []string{g.key(), g.key()} },
	"COPY": func(g *diffGen) []string {
		return append([]string{g.key(), g.key()}, g.options(0.3, g.flag("REPLACE"), func() []string {
			return []string{g.word("DB"), g.pick("0", "1", "-1", "x", "2147483648", "00")}
		})...)
	},
	"EXPIRETIME":  func(g *diffGen) []string { return []string{g.key()} },
	"PEXPIRETIME": func(g *diffGen) []string { return []string{g.key()} },
	"KEYS":        func(g *diffGen) []string { return []string{g.pattern()} },
	"SCAN":        func(g *diffGen) []string { return append([]string{g.cursor()}, g.scanOpts(true)...) },
	// Strings.
	"GET": func(g *diffGen) []string { return []string{g.key()} },
	"SET": func(g *diffGen) []string {
		return append([]string{g.key(), g.value()}, g.options(0.25, g.flag("NX"), g.flag("XX"), g.flag("GET"),
			g.flag("KEEPTTL"), g.expiry, g.expiry)...)
	},
	"SETNX":  func(g *diffGen) []string { return []string{g.key(), g.value()} },
	"SETEX":  func(g *diffGen) []string { return []string{g.key(), g.pick(diffSeconds...), g.value()} },
	"PSETEX": func(g *diffGen) []string { return []string{g.key(), g.pick(diffMillis...), g.value()} },
	"GETSET": func(g *diffGen) []string { return []string{g.key(), g.value()} },
	"GETDEL": func(g *diffGen) []string { return []string{g.key()} },
	"GETEX": func(g *diffGen) []string {
		return append([]string{g.key()}, g.options(0.3, g.flag("PERSIST"), g.expiry)...)
	},
	"MGET":        func(g *diffGen) []string { return g.keys(1) },
	"MSET":        func(g *diffGen) []string { return g.pairs(g.key, g.value) },
	"MSETNX":      func(g *diffGen) []string { return g.pairs(g.key, g.value) },
	"APPEND":      func(g *diffGen) []string { return []string{g.key(), g.value()} },
	"STRLEN":      func(g *diffGen) []string { return []string{g.key()} },
	"INCR":        func(g *diffGen) []string { return []string{g.key()} },
	"DECR":        func(g *diffGen) []string { return []string{g.key()} },
	"INCRBY":      func(g *diffGen) []string { return []string{g.key(), g.num()} },
	"DECRBY":      func(g *diffGen) []string { return []string{g.key(), g.num()} },
	"INCRBYFLOAT": func(g *diffGen) []string { return []string{g.key(), g.float()} },
	"GETRANGE":    func(g *diffGen) []string { return []string{g.key(), g.index(), g.index()} },
	"SUBSTR":      func(g *diffGen) []string { return []string{g.key(), g.index(), g.index()} },
	"SETRANGE":    func(g *diffGen) []string { return []string{g.key(), g.pick(diffOffsets...), g.value()} },
	"SETBIT": func(g *diffGen) []string {
		return []string{g.key(), g.pick(diffBitOffsets...), g.pick("0", "1", "1", "0", "2", "-1", "x", "", "01")}
	},
	"GETBIT":   func(g *diffGen) []string { return []string{g.key(), g.pick(diffBitOffsets...)} },
	"BITCOUNT": func(g *diffGen) []string { return append([]string{g.key()}, g.bitRange(false)...) },
	"BITPOS": func(g *diffGen) []string {
		return append([]string{g.key(), g.pick("0", "1", "1", "0", "2", "-1", "x")}, g.bitRange(true)...)
	},
	"LCS": func(g *diffGen) []string {
		return append([]string{g.key(), g.key()}, g.options(0.3, g.flag("IDX"), g.flag("LEN"), g.flag("WITHMATCHLEN"),
			func() []string { return []string{g.word("MINMATCHLEN"), g.pick("0", "1", "2", "3", "-1", "x", "100")} })...)
	},
	// Lists.
	"LPUSH":  func(g *diffGen) []string { return append([]string{g.key()}, g.many(g.value)...) },
	"RPUSH":  func(g *diffGen) []string { return append([]string{g.key()}, g.many(g.value)...) },
	"LPUSHX": func(g *diffGen) []string { return append([]string{g.key()}, g.many(g.value)...) },
	"RPUSHX": func(g *diffGen) []string { return append([]string{g.key()}, g.many(g.value)...) },
	"LPOP":   func(g *diffGen) []string { return append([]string{g.key()}, g.many(g.num)[:g.r.Intn(2)]...) },
	"RPOP":   func(g *diffGen) []string { return append([]string{g.key()}, g.many(g.num)[:g.r.Intn(2)]...) },
	"LLEN":   func(g *diffGen) []string { return []string{g.key()} },
	"LRANGE": func(g *diffGen) []string { return []string{g.key(), g.index(), g.index()} },
	"LINDEX": func(g *diffGen) []string { return []string{g.key(), g.index()} },
	"LSET":   func(g *diffGen) []string { return []string{g.key(), g.index(), g.value()} },
	"LREM":   func(g *diffGen) []string { return []string{g.key(), g.index(), g.value()} },
	"LTRIM":  func(g *diffGen) []string { return []string{g.key(), g.index(), g.index()} },
	"LINSERT": func(g *diffGen) []string {
		return []string{g.key(), g.word(g.pick("BEFORE", "AFTER", "BEFORE", "AFTER", "MIDDLE")), g.value(), g.value()}
	},
	"LPOS": func(g *diffGen) []string {
		return append([]string{g.key(), g.value()}, g.options(0.3,
			func() []string { return []string{g.word("RANK"), g.pick(diffRanks...)} },
			func() []string { return []string{g.word("COUNT"), g.num()} },
			func() []string { return []string{g.word("MAXLEN"), g.num()} })...)
	},
	"LMOVE":     func(g *diffGen) []string { return []string{g.key(), g.key(), g.listSide(), g.listSide()} },
	"RPOPLPUSH": func(g *diffGen) []string { return []string{g.key(), g.key()} },
	"LMPOP": func(g *diffGen) []string {
		keys := g.keys(1)
		n := strconv.Itoa(len(keys))
		if g.chance(0.1) {
			n = g.pick("0", "-1", "x", "", "4", "9223372036854775807", "01")
		}
		args := append(append([]string{n}, keys...), g.listSide())
		return append(args, g.options(0.3, func() []string { return []string{g.word("COUNT"), g.num()} })...)
	},
	// BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX and
	// BZMPOP are left out: on random keys redis-server would block the
	// test's connection where psp answers an error. Their forms that do
	// not block are in redistest's "blocking" sequence.
	// Hashes.
	"HSET":         func(g *diffGen) []string { return append([]string{g.key()}, g.pairs(g.field, g.value)...) },
	"HMSET":        func(g *diffGen) []string { return append([]string{g.key()}, g.pairs(g.field, g.value)...) },
	"HSETNX":       func(g *diffGen) []string { return []string{g.key(), g.field(), g.value()} },
	"HGET":         func(g *diffGen) []string { return []string{g.key(), g.field()} },
	"HMGET":        func(g *diffGen) []string { return append([]string{g.key()}, g.many(g.field)...) },
	"HDEL":         func(g *diffGen) []string { return append([]string{g.key()}, g.many(g.field)...) },
	"HLEN":         func(g *diffGen) []string { return []string{g.key()} },
	"HSTRLEN":      func(g *diffGen) []string { return []string{g.key(), g.field()} },
	"HGETALL":      func(g *diffGen) []string { return []string{g.key()} },
	"HKEYS":        func(g *diffGen) []string { return []string{g.key()} },
	"HVALS":        func(g *diffGen) []string { return []string{g.key()} },
	"HEXISTS":      func(g *diffGen) []string { return []string{g.key(), g.field()} },
	"HINCRBY":      func(g *diffGen) []string { return []string{g.key(), g.field(), g.num()} },
	"HINCRBYFLOAT": func(g *diffGen) []string { return []string{g.key(), g.field(), g.float()} },
	"HSCAN":        func(g *diffGen) []string { return append([]string{g.key(), g.cursor()}, g.scanOpts(false)...) },
	// Sets.
	"SADD":       func(g *diffGen) []string { return append([]string{g.key()}, g.many(g.member)...) },
	"SREM":       func(g *diffGen) []string { return append([]string{g.key()}, g.many(g.member)...) },
	"SMEMBERS":   func(g *diffGen) []string { return []string{g.key()} },
	"SISMEMBER":  func(g *diffGen) []string { return []string{g.key(), g.member()} },
	"SMISMEMBER": func(g *diffGen) []string { return append([]string{g.key()}, g.many(g.member)...) },
	"SCARD":      func(g *diffGen) []string { return []string{g.key()} },
	"SPOP": func(g *diffGen) []string {
		// A count of at least the set's size (the grammar's sets have
		// at most 514 members): all of them, none left to chance.
		return []string{g.key(), g.pick("1000", "600", "0", "-1", "x", "9223372036854775807", "", "-9223372036854775808")}
	},
	"SRANDMEMBER": func(g *diffGen) []string {
		// Not a count as large as -2147483649: that many picks is a reply
		// of gigabytes.
		if g.chance(0.3) {
			return []string{g.key()}
		}
		return []string{g.key(), g.pick("-5", "-1", "0", "1", "2", "3", "10", "x", "", "-0", "1.0",
			"9223372036854775807", "-9223372036854775808")}
	},
	"SSCAN":       func(g *diffGen) []string { return append([]string{g.key(), g.cursor()}, g.scanOpts(false)...) },
	"SINTER":      func(g *diffGen) []string { return g.keys(1) },
	"SUNION":      func(g *diffGen) []string { return g.keys(1) },
	"SDIFF":       func(g *diffGen) []string { return g.keys(1) },
	"SINTERSTORE": func(g *diffGen) []string { return append([]string{g.key()}, g.keys(1)...) },
	"SUNIONSTORE": func(g *diffGen) []string { return append([]string{g.key()}, g.keys(1)...) },
	"SDIFFSTORE":  func(g *diffGen) []string { return append([]string{g.key()}, g.keys(1)...) },
	"SINTERCARD": func(g *diffGen) []string {
		keys := g.keys(1)
		n := strconv.Itoa(len(keys))
		if g.chance(0.2) {
			n = g.pick("0", "-1", "x", "", "4", "9223372036854775808", "01", "1")
		}
		out := append([]string{n}, keys...)
		if g.chance(0.4) {
			out = append(out, g.word("LIMIT"), g.pick("0", "1", "2", "-1", "x", "", "9223372036854775807", "100"))
		}
		return out
	},
	"SMOVE": func(g *diffGen) []string { return []string{g.key(), g.key(), g.member()} },
	// Streams: explicit ids only (* takes the clock's).
	"XADD": func(g *diffGen) []string {
		args := append([]string{g.key()}, g.options(0.2, g.flag("NOMKSTREAM"))...)
		if g.chance(0.3) {
			args = append(args, g.streamTrim()...)
		}
		return append(append(args, g.streamID()), g.pairs(g.field, g.value)...)
	},
	"XLEN":      func(g *diffGen) []string { return []string{g.key()} },
	"XRANGE":    func(g *diffGen) []string { return g.streamRange() },
	"XREVRANGE": func(g *diffGen) []string { return g.streamRange() },
	"XDEL": func(g *diffGen) []string {
		return append([]string{g.key()}, g.many(g.streamID)...)
	},
	"XTRIM": func(g *diffGen) []string { return append([]string{g.key()}, g.streamTrim()...) },
	"XREAD": func(g *diffGen) []string {
		var args []string
		if g.chance(0.3) {
			args = append(args, g.word("COUNT"), g.pick("0", "1", "2", "-1", "x"))
		}
		keys := g.keys(1)
		args = append(args, g.word("STREAMS"))
		args = append(args, keys...)
		for range keys {
			args = append(args, g.pick("0", "$", "1-1", "2", "(1", "x", "+", "-", "5-0"))
		}
		return args
	},
	// Sorted sets.
	"ZADD": func(g *diffGen) []string {
		return append(append([]string{g.key()}, g.options(0.15, g.flag("NX"), g.flag("XX"), g.flag("GT"),
			g.flag("LT"), g.flag("CH"), g.flag("INCR"))...), g.pairs(func() string { return g.score(false) }, g.member)...)
	},
	"ZINCRBY":  func(g *diffGen) []string { return []string{g.key(), g.float(), g.member()} },
	"ZREM":     func(g *diffGen) []string { return append([]string{g.key()}, g.many(g.member)...) },
	"ZSCORE":   func(g *diffGen) []string { return []string{g.key(), g.member()} },
	"ZCARD":    func(g *diffGen) []string { return []string{g.key()} },
	"ZRANK":    func(g *diffGen) []string { return []string{g.key(), g.member()} },
	"ZREVRANK": func(g *diffGen) []string { return []string{g.key(), g.member()} },
	"ZCOUNT":   func(g *diffGen) []string { return []string{g.key(), g.score(true), g.score(true)} },
	"ZPOPMIN":  func(g *diffGen) []string { return append([]string{g.key()}, g.many(g.num)[:g.r.Intn(2)]...) },
	"ZPOPMAX":  func(g *diffGen) []string { return append([]string{g.key()}, g.many(g.num)[:g.r.Intn(2)]...) },
	"ZSCAN":    func(g *diffGen) []string { return append([]string{g.key(), g.cursor()}, g.scanOpts(false)...) },
	"ZREVRANGE": func(g *diffGen) []string {
		return append([]string{g.key(), g.index(), g.index()}, g.options(0.4, g.flag("WITHSCORES"))...)
	},
	"ZRANGE": func(g *diffGen) []string {
		byScore := g.chance(0.5)
		var lo, hi string
		if byScore {
			lo, hi = g.score(true), g.score(true)
		} else {
			lo, hi = g.index(), g.index()
		}
		opts := []func() []string{g.flag("REV"), g.flag("WITHSCORES"), g.limit}
		if byScore || g.chance(0.1) {
			opts = append(opts, g.flag("BYSCORE"))
		}
		if g.chance(0.2) {
			lo, hi = g.lex(), g.lex()
			opts = append(opts, g.flag("BYLEX"))
		}
		return append([]string{g.key(), lo, hi}, g.options(0.35, opts...)...)
	},
	"ZRANGEBYSCORE": func(g *diffGen) []string {
		return append([]string{g.key(), g.score(true), g.score(true)}, g.options(0.35, g.flag("WITHSCORES"), g.limit)...)
	},
	"ZREVRANGEBYSCORE": func(g *diffGen) []string {
		return append([]string{g.key(), g.score(true), g.score(true)}, g.options(0.35, g.flag("WITHSCORES"), g.limit)...)
	},
	"ZRANGEBYLEX": func(g *diffGen) []string {
		return append([]string{g.key(), g.lex(), g.lex()}, g.options(0.35, g.limit, g.flag("WITHSCORES"))...)
	},
	"ZREVRANGEBYLEX": func(g *diffGen) []string {
		return append([]string{g.key(), g.lex(), g.lex()}, g.options(0.35, g.limit)...)
	},
	"ZLEXCOUNT":        func(g *diffGen) []string { return []string{g.key(), g.lex(), g.lex()} },
	"ZREMRANGEBYLEX":   func(g *diffGen) []string { return []string{g.key(), g.lex(), g.lex()} },
	"ZREMRANGEBYSCORE": func(g *diffGen) []string { return []string{g.key(), g.score(true), g.score(true)} },
	"ZREMRANGEBYRANK":  func(g *diffGen) []string { return []string{g.key(), g.index(), g.index()} },
	"ZMSCORE":          func(g *diffGen) []string { return append([]string{g.key()}, g.many(g.member)...) },
	"ZRANGESTORE": func(g *diffGen) []string {
		var lo, hi string
		opts := []func() []string{g.flag("REV"), g.limit}
		switch g.r.Intn(3) {
		case 0:
			lo, hi = g.index(), g.index()
		case 1:
			lo, hi = g.score(true), g.score(true)
			opts = append(opts, g.flag("BYSCORE"))
		default:
			lo, hi = g.lex(), g.lex()
			opts = append(opts, g.flag("BYLEX"))
		}
		return append([]string{g.key(), g.key(), lo, hi}, g.options(0.5, opts...)...)
	},
	"ZUNION":      func(g *diffGen) []string { return g.zsetop(true, true) },
	"ZINTER":      func(g *diffGen) []string { return g.zsetop(true, true) },
	"ZDIFF":       func(g *diffGen) []string { return g.zsetop(false, true) },
	"ZUNIONSTORE": func(g *diffGen) []string { return append([]string{g.key()}, g.zsetop(true, false)...) },
	"ZINTERSTORE": func(g *diffGen) []string { return append([]string{g.key()}, g.zsetop(true, false)...) },
	"ZDIFFSTORE":  func(g *diffGen) []string { return append([]string{g.key()}, g.zsetop(false, false)...) },
	"ZINTERCARD": func(g *diffGen) []string {
		keys := g.keys(1)
		return append(append([]string{g.numkeys(len(keys))}, keys...), g.options(0.3, func() []string {
			return []string{g.word("LIMIT"), g.pick("0", "1", "2", "-1", "x", "9223372036854775807")}
		})...)
	},
	"ZMPOP": func(g *diffGen) []string {
		keys := g.keys(1)
		return append(append(append([]string{g.numkeys(len(keys))}, keys...), g.word(g.pick("MIN", "MAX", "x"))),
			g.options(0.4, func() []string {
				return []string{g.word("COUNT"), g.pick("1", "2", "10", "0", "-1", "x", "9223372036854775807")}
			})...)
	},
	"ZRANDMEMBER": func(g *diffGen) []string { return g.randCount("WITHSCORES") },
	"HRANDFIELD":  func(g *diffGen) []string { return g.randCount("WITHVALUES") },
}

// lex is a ZRANGEBYLEX bound.
func (g *diffGen) lex() string {
	return g.pick("-", "+", "[a", "(a", "[b", "(c", "[", "(", "a", "", "+x", "-x", "[1", "(10", "[\x00", "[x y")
}

// numkeys is the key count of ZUNION and its kin: mostly n, now and then
// wrong.
func (g *diffGen) numkeys(n int) string {
	if g.chance(0.9) {
		return strconv.Itoa(n)
	}
	return g.pick("0", "-1", "x", strconv.Itoa(n+1), strconv.Itoa(n+5), "9223372036854775807")
}

// zsetop is the numkeys, keys and options of ZUNION, ZINTER, ZDIFF and
// their STORE forms.
func (g *diffGen) zsetop(weights, withScores bool) []string {
	keys := g.keys(1)
	args := append([]string{g.numkeys(len(keys))}, keys...)
	opts := []func() []string{}
	if weights {
		opts = append(opts, func() []string {
			w := []string{g.word("WEIGHTS")}
			for range keys {
				w = append(w, g.pick("1", "2", "0", "-1", "0.5", "inf", "-inf", "x", "nan", "-0"))
			}
			return w
		}, func() []string { return []string{g.word("AGGREGATE"), g.word(g.pick("SUM", "MIN", "MAX", "x"))} })
	}
	if withScores {
		opts = append(opts, g.flag("WITHSCORES"))
	}
	return append(args, g.options(0.4, opts...)...)
}

// randCount is the arguments of ZRANDMEMBER and HRANDFIELD. Not a
// negative count as large as -2147483649: that many picks is a reply of
// gigabytes.
func (g *diffGen) randCount(with string) []string {
	if g.chance(0.2) {
		return []string{g.key()}
	}
	args := []string{g.key(), g.pick("-5", "-1", "0", "1", "2", "3", "10", "1000", "x", "", "-0", "1.0",
		"9223372036854775807", "-9223372036854775808", "4611686018427387904")}
	if g.chance(0.5) {
		args = append(args, g.word(with))
	}
	return args
}

// big is a command that fills a collection to about where redis-server
// changes its encoding (512 hash fields or integers in a set, 128 sorted
// set members), one side or the other.
func (g *diffGen) big() []string {
	key := g.key()
	switch g.r.Intn(4) {
	case 0:
		n := 510 + g.r.Intn(5)
		args := []string{"HSET", key}
		for i := 0; i < n; i++ {
			args = append(args, "f"+strconv.Itoa(i), strconv.Itoa(i))
		}
		return args
	case 1:
		n := 126 + g.r.Intn(5)
		args := []string{"ZADD", key}
		for i := 0; i < n; i++ {
			args = append(args, strconv.Itoa(i%7), "m"+strconv.Itoa(i))
		}
		return args
	case 2:
		n := 510 + g.r.Intn(5)
		args := []string{"SADD", key}
		for i := 0; i < n; i++ {
			args = append(args, strconv.Itoa(i*3-700))
		}
		return args
	}
	n := 126 + g.r.Intn(5)
	args := []string{"RPUSH", key}
	for i := 0; i < n; i++ {
		args = append(args, strconv.Itoa(i))
	}
	return args
}

// streamID is an entry id for XADD and XDEL: mostly well formed and
// small, so that ids collide and come out of order.
func (g *diffGen) streamID() string {
	return g.pick("1", "1-1", "2", "2-0", "2-*", "3-5", "5", "5-*", "10-1", "0-1", "0-0", "0-*",
		"18446744073709551615-18446744073709551615", "18446744073709551615-*", "-", "+", "x", "1-x", "(1", "1-")
}

// streamRange is XRANGE's (XREVRANGE's) key, bounds and COUNT.
func (g *diffGen) streamRange() []string {
	bound := func() string {
		return g.pick("-", "+", "0", "1", "1-1", "(1", "(1-1", "2", "(2-0", "5", "(5", "10-1", "x", "(", "(-", "(+",
			"18446744073709551615-18446744073709551615", "(0-0")
	}
	args := []string{g.key(), bound(), bound()}
	if g.chance(0.3) {
		args = append(args, g.word("COUNT"), g.pick("0", "1", "2", "-1", "x"))
	}
	return args
}

// streamTrim is XADD's and XTRIM's MAXLEN or MINID, = or ~, and LIMIT.
func (g *diffGen) streamTrim() []string {
	args := []string{g.word(g.pick("MAXLEN", "MINID"))}
	if g.chance(0.6) {
		args = append(args, g.pick("~", "=", "~"))
	}
	args = append(args, g.pick("0", "1", "2", "3", "5", "-1", "x", "2-0", "5-*"))
	if g.chance(0.2) {
		args = append(args, g.word("LIMIT"), g.pick("0", "1", "5", "-1", "x"))
	}
	return args
}

// listSide is LMOVE's and LMPOP's LEFT or RIGHT, now and then neither.
func (g *diffGen) listSide() string {
	if g.chance(0.05) {
		return g.pick("UP", "", "LEFTX", "0")
	}
	return g.word(g.pick("LEFT", "RIGHT"))
}

// bitRange is BITCOUNT's (BITPOS's, pos) optional range: a start (alone
// only for BITPOS), an end, BIT or BYTE, now and then one too many.
func (g *diffGen) bitRange(pos bool) []string {
	r := []string{g.index(), g.index(), g.word(g.pick("BIT", "BYTE", "BIT", "BYTE", "BITS")), g.index()}
	n := g.r.Intn(5)
	if !pos && n == 1 && g.chance(0.8) {
		n = 2
	}
	return r[:n]
}

func (g *diffGen) limit() []string {
	return []string{g.word("LIMIT"), g.pick("0", "1", "-1", "2", "x", "-5", "100", "9223372036854775807"),
		g.pick("0", "1", "-1", "2", "x", "-5", "100", "9223372036854775807")}
}

func (g *diffGen) expireOpts() []string {
	return g.options(0.12, g.flag("NX"), g.flag("XX"), g.flag("GT"), g.flag("LT"), g.flag("FOO"))
}

// diffCommandNames are names COMMAND INFO and DOCS are asked about. Left
// out: the containers (CLIENT, CONFIG, COMMAND, ...), whose subcommands
// psp has only some of, and COMMAND INFO or DOCS of every command.
var diffCommandNames = []string{"get", "set", "zadd", "zincrby", "hset", "hmset", "scan", "sscan", "ping", "echo",
	"lpush", "lpop", "zrange", "zrangebyscore", "expire", "pexpireat", "del", "incrbyfloat", "getex", "spop",
	"srandmember", "lpos", "lmpop", "xadd", "xrange", "xread", "setbit", "lcs", "select", "hello", "auth", "quit", "reset", "time", "info", "dbsize", "flushall",
	"client|setname", "client|id", "config|get", "command|info", "command|docs", "multi", "eval", "subscribe",
	"publish", "nosuch", "", "GET", "Set", "client|nosuch", "get|x"}

// diffNames is diffGrammar's names, sorted, so that a seed picks the
// same commands whatever the map's order.
var diffNames = func() []string {
	names := make([]string, 0, len(diffGrammar))
	for n := range diffGrammar {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}()

// command generates one command, now and then malformed: an argument
// dropped, one added, one replaced by junk.
func (g *diffGen) command() []string {
	if g.names != nil {
		return g.commandOf(g.names[g.r.Intn(len(g.names))])
	}
	if g.chance(0.01) {
		return g.big()
	}
	name := diffNames[g.r.Intn(len(diffNames))]
	for name == "FLUSHDB" || name == "NOSUCH" { // rarer than the others
		if g.chance(0.2) {
			break
		}
		name = diffNames[g.r.Intn(len(diffNames))]
	}
	return g.commandOf(name)
}

// commandOf generates one command name, now and then malformed.
func (g *diffGen) commandOf(name string) []string {
	args := append([]string{g.word(name)}, diffGrammar[name](g)...)
	if len(args) > 1 && g.chance(0.05) {
		i := 1 + g.r.Intn(len(args)-1)
		args = slices.Delete(args, i, i+1)
	}
	if g.chance(0.05) {
		i := 1 + g.r.Intn(len(args))
		args = slices.Insert(args, i, g.pick(diffJunk...))
	}
	if len(args) > 1 && g.chance(0.03) {
		args[1+g.r.Intn(len(args)-1)] = g.pick(diffJunk...)
	}
	for i := 2; i < len(args); i++ {
		// An expiry of a few milliseconds would expire between two
		// commands on one server and not on the other.
		ms := strings.EqualFold(args[i-1], "px") || (i == 2 && (name == "PSETEX" || name == "PEXPIRE"))
		if n, err := strconv.Atoi(args[i]); ms && err == nil && n > 0 && n < 10000 {
			args[i] = "100000"
		}
	}
	if name == "SPOP" && len(args) == 2 {
		args = append(args, "1000") // SPOP without a count is left out
	}
	if g.chance(0.15) {
		args = append([]string{diffInline}, args...)
	}
	return args
}

// diffFragments are pieces of raw client input: inline commands with
// quotes and escapes, empty lines, multibulk requests well-formed and
// not. TestDifferentialProtocol sends random runs of them. Left out: a
// count of arguments that cannot fit the longest request
// ("*2147483647"), which psp refuses at once where redis-server reads on
// (docs/redis.md).
var diffFragments = []string{
	"PING\r\n", "PING\n", "\r\n", "\n", "  \r\n", " \t \n", "\r\r\n", "\tPING\t\r\n", "\n\n\n",
	"*0\r\n", "*-1\r\n", "*-5\r\n", "*1\r\n$-1\r\n", "*2\r\n$4\r\nECHO\r\n$-1\r\n", "$-1\r\n", "$4\r\nPING\r\n",
	"*1\r\n$0\r\n\r\n", "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n",
	"*+1\r\n", "*1\r\n$+4\r\nPING\r\n", "*1\r\n$04\r\nPING\r\n", "*1\r\n$ 4\r\nPING\r\n", "*1 \r\n", "* 1\r\n",
	"*\r\n", "*1\r\n$\r\n", "*1\r\n:1\r\n", "*1\r\n+PING\r\n", "*1\r\n$4\r\nPING\n\n",
	"*2\r\n$4\r\nECHO\r\n$3\r\na\r\n\r\n", "*1\r\n$4\r\nPING\r\n", "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
	"*-0\r\n", "*00\r\n", "*1\r\n$-0\r\n", "*1\r\n$-2\r\n", "*2147483648\r\n", "*1\r\n$2147483648\r\n",
	"*1\r\n$9223372036854775808\r\n", "*18446744073709551617\r\n", "*1x\r\n", "*1\r\n$4x\r\nPING\r\n",
	"ECHO \"\\x41\\x4\"\r\n", "ECHO \"\\x41\"\r\n", "ECHO \"a\r\n", "ECHO 'a\\'b'\r\n", "ECHO \"a\"b\r\n",
	"ECHO \"\\xZZ\"\r\n", "ECHO \"\\xzz\\x7a\"\r\n", "SET k \"a b\"\n", "GET k\r\n", "ECHO a\rb\r\n",
	"ECHO \"\"\r\n", "ECHO ''\r\n", "ECHO '\"'\r\n", "ECHO \"'\"\r\n", "ECHO \"\\n\\r\\t\\b\\a\\0\\q\"\r\n",
	"ECHO 'a\\nb'\r\n", "ECHO \"a\" \"b\"\r\n", "ECHO \"a\"\"b\"\r\n", "ECHO a\"b\"\r\n", "ECHO \"\\\"\r\n",
	"ECHO ' a '\r\n", "ECHO\r\n", "ECHO \"\\x\"\r\n", "ECHO \"\\x4\"\r\n", "ECHO \"\\\\\"\r\n",
	"ECHO \xff\xfe\r\n", "\"ECHO\" x\r\n", "'PING'\r\n", "\"\"\r\n", "''\r\n",
	"SET\r\n", "GET k k\r\n", "NOSUCH a b\r\n", "ping\r\nping\r\n", "PING a b c\r\n",
	"NG\r\n", "$1\r\nx\r\n",
	"ECHO " + strings.Repeat("x", 20000) + "\r\n", "ECHO " + strings.Repeat("y", 60000) + "\r\n",
	strings.Repeat("z", 70000) + "\r\n", "*1\r\n$70000\r\n" + strings.Repeat("w", 70000) + "\r\n",
	"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$40000\r\n" + strings.Repeat("v", 40000) + "\r\n",
	"*" + strings.Repeat("1", 30) + "\r\n", "*1\r\n$" + strings.Repeat("9", 30) + "\r\n",
	"*1\r\n$4\r\nPING\r\n\r\n", "\r\n\r\n", "*1\r\n\r\n", "*1\r\n$4\r\nPINGXX", "ECHO \"a\\\"b\"\r\n",
	"ECHO\ta\tb\r\n", "ECHO a\x0bb\r\n", "ECHO a\x0cb\r\n", "QUIT\r\n", "*1\r\n$4\r\nQUIT\r\n", "RESET\r\n",
	"*2\r\n$4\r\nECHO\r\n$3\r\nabc\r\r", "*2\r\n$4\r\nECHO\r\n$3\r\nabc\n\n", "ECHO \"\\x4g\"\r\n",
	"ECHO \"\\xg4\"\r\n", "ECHO \"\\X41\"\r\n", "ECHO 'a' 'b'\r\n", "ECHO 'a'b\r\n", "ECHO 'a\\\\'\r\n",
	"ECHO \"\\\\\"x\r\n", "   \r\n", "*1\r\n$1\r\n\x00\r\n", "*2\r\n$4\r\nEcHo\r\n$5\r\na\r\nb\r\n", "POST / HTTP/1.1\r\n", "host: x\r\n",
	"GET / HTTP/1.1\r\n", "*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n",
	"HGETALL k\r\n", "ZSCORE k m\r\n", "SMEMBERS k\r\n", "ZADD k 1.5 m\r\n", "*2\r\n$4\r\nLPOP\r\n$1\r\nk\r\n",
}

// diffPartial are fragments that leave a request unfinished: what
// follows them (the sentinel too) is read as its rest, and a server may
// wait for more (a NUL byte hides a line end from redis-server's
// strchr). They are picked less often: each wait costs the test half a
// second.
var diffPartial = []string{"*1\r\n$4\r\nPI", "*2\r\n$4\r\nECHO\r\n", "*1\n$4\nPING\n", "*3\r\n", "*1\r\n$10\r\n",
	"echo \x00\r\n", "PING\r", "\x00\r\n", "*\x00\r\n", "*1\x00\r\n", "*1\r\n$1\x00\r\nx\r\n"}

// TestDifferentialProtocol sends random runs of raw input fragments to
// redis-server and to psp, each on a fresh connection and followed by a
// PING, and compares everything each sends back and whether it closes
// the connection (or waits for more). PSP_REDIS_DIFF_SEQS and
// PSP_REDIS_DIFF_SEED size and seed it as TestDifferentialRandom.
func TestDifferentialProtocol(t *testing.T) { diffProtocol(t, false, 300) }

// TestDifferentialProtocolRESP3 is TestDifferentialProtocol on
// connections that sent HELLO 3 first.
func TestDifferentialProtocolRESP3(t *testing.T) { diffProtocol(t, true, 200) }

func diffProtocol(t *testing.T, resp3 bool, defStreams int) {
	streams := diffEnv(t, "PSP_REDIS_DIFF_SEQS", defStreams)
	seed := int64(diffEnv(t, "PSP_REDIS_DIFF_SEED", 1))
	maxFails := diffEnv(t, "PSP_REDIS_DIFF_FAILS", 5)
	real := redistest.StartRedis(t)
	psp := diffPSP(t)
	fails := 0
	for i := 0; i < streams && fails < maxFails; i++ {
		r := rand.New(rand.NewSource(seed + int64(i)))
		var frags []string
		for n := 1 + r.Intn(5); n > 0; n-- {
			if r.Intn(200) == 0 {
				frags = append(frags, diffPartial[r.Intn(len(diffPartial))])
				continue
			}
			frags = append(frags, diffFragments[r.Intn(len(diffFragments))])
		}
		if len(strings.Join(frags, "")) > 16<<10 {
			// An HTTP request closes the connection with the replies not
			// yet written: redis-server writes after each read of 16
			// KiB, psp once it has used up what it read, so that which
			// replies a long stream has sent first is up to the reads.
			frags = slices.DeleteFunc(frags, func(f string) bool {
				l := strings.ToLower(f)
				return strings.HasPrefix(l, "post ") || strings.HasPrefix(l, "host:")
			})
		}
		var in strings.Builder
		for _, f := range frags {
			in.WriteString(f)
		}
		for _, addr := range []string{real, psp} { // no stream sees another's keys
			c, err := redistest.Dial(addr)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Do("FLUSHALL"); err != nil {
				t.Fatalf("FLUSHALL on %s: %v", addr, err)
			}
			c.Close()
		}
		want := rawExchange(t, real, in.String(), resp3)
		got := rawExchange(t, psp, in.String(), resp3)
		if !bytes.Equal(got, want) {
			fails++
			t.Errorf("seed %d: %.300q:\npsp:          %.300q\nredis-server: %.300q", seed+int64(i), in.String(), got, want)
		}
	}
	t.Logf("%d streams, seeds %d..%d", streams, seed, seed+int64(streams)-1)
}

// rawExchange sends in and the sentinel, and returns what the server
// sent until the sentinel's reply, the connection's end ("<closed>"), or
// half a second without a byte ("<waiting>": the server waits for the
// rest of a request).
func rawExchange(t *testing.T, addr, in string, resp3 bool) []byte {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if resp3 {
		// HELLO 3 first: its reply, which names the connection, is read
		// whole and left out.
		if _, err := c.Write(redistest.Command("HELLO", "3")); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if r, err := redistest.ReadReply(bufio.NewReaderSize(c, 16)); err != nil || r[0] != '%' {
			t.Fatalf("HELLO 3: %q, %v", r, err)
		}
	}
	in += sentinel
	go func() {
		_, _ = c.Write([]byte(in))
	}()
	var got []byte
	buf := make([]byte, 1<<16)
	for !bytes.HasSuffix(got, []byte(sentinelReply)) {
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			return append(got, "<waiting>"...)
		case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err):
			return append(got, "<closed>"...)
		default:
			t.Fatalf("after %q: %v", got, err)
		}
	}
	return got
}
