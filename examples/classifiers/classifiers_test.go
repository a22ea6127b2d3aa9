package classifiers_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/app/kv"
	"github.com/persephone-go/psp/app/memcached"
	"github.com/persephone-go/psp/app/redis"
	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/wasmclass"
	"github.com/persephone-go/psp/wire"
)

// request is one payload and the type a classifier must give it.
type request struct {
	name    string
	payload []byte
	want    uint32
}

// pspHeaderModules is the psp header classifier in every guest language.
var pspHeaderModules = []string{
	"c/pspheader.wasm",
	"rust/pspheader.wasm",
	"assemblyscript/pspheader.wasm",
	"go/pspheader.wasm",
	"wat/pspheader.wasm",
}

// pspHeaderNames are the psp header classifier's types ("" = unnamed).
var pspHeaderNames = []string{
	"UNKNOWN", "SHORT", "LONG", "", "",
	"NewOrder", "Payment", "Delivery", "OrderStatus", "StockLevel", "GET", "SCAN",
}

// headerPayload returns a 16-byte psp request header.
func headerPayload(id, typ uint32) []byte { return header(id, typ, 0) }

// header returns a psp request header of the given type, followed by extra
// bytes of padding.
func header(id, typ uint32, extra int) []byte {
	b := make([]byte, wire.HeaderLen+extra)
	wire.Header{ID: id, Type: typ, ServiceNs: 1000}.Encode(b)
	for i := wire.HeaderLen; i < len(b); i++ {
		b[i] = byte(i)
	}
	return b
}

// pspHeaderRequests is the one table every psp header classifier must pass.
func pspHeaderRequests() []request {
	reqs := []request{
		{"empty", nil, wire.TypeUnknown},
		{"15 bytes", header(1, wire.TypeShort, 0)[:15], wire.TypeUnknown},
		{"type 0", header(2, wire.TypeUnknown, 0), wire.TypeUnknown},
		{"type 3 (unnamed, in range)", header(3, 3, 0), 3},
		{"type 12 (out of range)", header(4, 12, 0), wire.TypeUnknown},
		{"type 2^32-1", header(5, 0xFFFFFFFF, 0), wire.TypeUnknown},
		{"type 256+1", header(6, 257, 0), wire.TypeUnknown},
		{"SHORT with a 1000-byte body (cut to the prefix)", header(7, wire.TypeShort, 1000), wire.TypeShort},
		{"LONG with a 232-byte body (fills the prefix)", header(8, wire.TypeLong, wasmclass.Prefix-wire.HeaderLen), wire.TypeLong},
	}
	for i, typ := range []uint32{
		wire.TypeShort, wire.TypeLong, wire.TypeNewOrder, wire.TypePayment, wire.TypeDelivery,
		wire.TypeOrderStatus, wire.TypeStockLevel, wire.TypeGet, wire.TypeScan,
	} {
		reqs = append(reqs, request{fmt.Sprintf("type %d", typ), header(uint32(100+i), typ, i), typ})
	}
	// The wire package's native classifier agrees wherever the type is in
	// range: the table describes the header, not one implementation.
	for _, r := range reqs {
		if native := wire.TypeOf(r.payload); native < uint32(len(pspHeaderNames)) && native != r.want {
			panic(fmt.Sprintf("table entry %q: want %d, wire.TypeOf says %d", r.name, r.want, native))
		}
	}
	return reqs
}

// load loads a module with default options, or fails the test.
func load(t testing.TB, path string) *wasmclass.Module {
	t.Helper()
	m, err := loadOpts(t, path, wasmclass.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// loadOpts loads a module and registers its Close.
func loadOpts(t testing.TB, path string, opts wasmclass.Options) (*wasmclass.Module, error) {
	t.Helper()
	bin, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := wasmclass.Load(context.Background(), bin, opts)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m, nil
}

// newInstance creates an instance and registers its Close.
func newInstance(t testing.TB, m *wasmclass.Module) *wasmclass.Instance {
	t.Helper()
	inst, err := m.NewInstance(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Close(context.Background()) })
	return inst
}

// checkNames asserts the module's type names (an empty wanted name accepts
// whatever default the host gives an unnamed type).
func checkNames(t *testing.T, m *wasmclass.Module, want []string) {
	t.Helper()
	got := m.Types()
	if len(got) != len(want) {
		t.Fatalf("Types() has %d names %q, want %d", len(got), got, len(want))
	}
	for i := range want {
		if want[i] != "" && got[i] != want[i] {
			t.Errorf("type %d is named %q, want %q", i, got[i], want[i])
		}
	}
}

// runTable classifies every request one by one and in batches (the whole
// table, so several batch calls when it has more than MaxBatch entries),
// and asserts the types and that nothing faulted.
func runTable(t *testing.T, m *wasmclass.Module, reqs []request) {
	t.Helper()
	inst := newInstance(t, m)
	for _, r := range reqs {
		if got := inst.Classify(r.payload); got != r.want {
			t.Errorf("Classify(%s %q) = %d, want %d", r.name, abbrev(r.payload), got, r.want)
		}
	}
	payloads := make([][]byte, len(reqs))
	for i, r := range reqs {
		payloads[i] = r.payload
	}
	out := make([]uint32, len(reqs))
	inst.ClassifyBatch(payloads, out)
	for i, r := range reqs {
		if out[i] != r.want {
			t.Errorf("ClassifyBatch: %s %q = %d, want %d", r.name, abbrev(r.payload), out[i], r.want)
		}
	}
	if f := inst.Faults(); f.Total() != 0 {
		t.Errorf("faults: %+v, want none", f)
	}
}

func abbrev(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

func TestPSPHeader(t *testing.T) { checkPSPHeader(t, ".") }

func checkPSPHeader(t *testing.T, dir string) {
	reqs := pspHeaderRequests()
	for _, path := range pspHeaderModules {
		t.Run(filepath.Dir(path), func(t *testing.T) {
			m := load(t, filepath.Join(dir, path))
			checkNames(t, m, pspHeaderNames)
			runTable(t, m, reqs)
		})
	}
}

// memcached types, in the order of memcached.c (and of
// app/memcached.TypeNames).
var memcachedNames = memcached.TypeNames()

func memcachedType(t *testing.T, name string) uint32 {
	for i, n := range memcachedNames {
		if n == name {
			return uint32(i)
		}
	}
	t.Fatalf("no memcached type %q", name)
	return 0
}

func TestMemcached(t *testing.T) { checkMemcached(t, ".") }

// memcachedCases is the memcached classifier's table.
func memcachedCases() []struct {
	payload []byte
	want    string
} {
	udp := func(s string) []byte { return append([]byte{0, 7, 0, 0, 0, 1, 0, 0}, s...) }
	longMultiget := "get" + strings.Repeat(" key", 100) + "\r\n"
	return []struct {
		payload []byte
		want    string
	}{
		{[]byte("get foo\r\n"), "GET"},
		{[]byte("get foo"), "GET"},
		{[]byte("get  foo \r\n"), "GET"},
		{[]byte("  get foo\r\n"), "GET"},
		{[]byte("bget foo\r\n"), "GET"},
		{[]byte("get a b c\r\n"), "MULTIGET"},
		{[]byte(longMultiget), "MULTIGET"},
		{[]byte("gets foo\r\n"), "GET"},
		{[]byte("gets a b\r\n"), "MULTIGET"},
		{[]byte("gat 100 foo\r\n"), "WRITE"},
		{[]byte("gats 100 foo\r\n"), "WRITE"},
		{[]byte("gat 100 a b\r\n"), "MULTIGET"},
		{[]byte("set k 0 0 5\r\nhello\r\n"), "WRITE"},
		{[]byte("add k 0 0 5\r\nhello\r\n"), "WRITE"},
		{[]byte("replace k 0 0 5\r\nhello\r\n"), "WRITE"},
		{[]byte("append k 0 0 1\r\nx\r\n"), "WRITE"},
		{[]byte("prepend k 0 0 1\r\nx\r\n"), "WRITE"},
		{[]byte("cas k 0 0 5 42\r\nhello\r\n"), "WRITE"},
		{[]byte("delete k\r\n"), "WRITE"},
		{[]byte("incr k 1\r\n"), "WRITE"},
		{[]byte("decr k 1\r\n"), "WRITE"},
		{[]byte("touch k 10\r\n"), "WRITE"},
		{[]byte("stats\r\n"), "OTHER"},
		{[]byte("stats slabs\r\n"), "OTHER"},
		{[]byte("flush_all\r\n"), "OTHER"},
		{[]byte("flush_all 10\n"), "OTHER"},
		{[]byte("version\r\n"), "OTHER"},
		{[]byte("verbosity 1\r\n"), "OTHER"},
		{[]byte("quit\r\n"), "OTHER"},
		{[]byte("shutdown\r\n"), "OTHER"},
		{[]byte("mg foo v\r\n"), "OTHER"},
		{[]byte("ms foo 2\r\nhi\r\n"), "OTHER"},
		{udp("get foo\r\n"), "GET"},
		{udp("set k 0 0 1\r\nx\r\n"), "WRITE"},
		{udp("get a b\r\n"), "MULTIGET"},
		{udp("get a\r\nget b c\r\n"), "GET"}, // the first command's type
		// Unknown: upper case, no key, no separator, unknown words, binary
		// protocol, truncated command word, a word longer than any command,
		// a frame header announcing two datagrams.
		{nil, "UNKNOWN"},
		{[]byte("GET foo\r\n"), "UNKNOWN"},
		{[]byte("get\r\n"), "UNKNOWN"},
		{[]byte("gat 100\r\n"), "UNKNOWN"},
		{[]byte("getfoo\r\n"), "UNKNOWN"},
		{[]byte("foo bar\r\n"), "UNKNOWN"},
		{[]byte("set"), "UNKNOWN"},
		{[]byte("verbosityx 1\r\n"), "UNKNOWN"},
		{[]byte("flush_alx\r\n"), "UNKNOWN"},
		{[]byte("shutdowns\r\n"), "UNKNOWN"},
		{[]byte("m\r\n"), "UNKNOWN"},
		{[]byte("mx foo\r\n"), "UNKNOWN"},
		{[]byte{0x80, 0x00, 0x00, 0x03, 0, 0, 0, 0, 0, 0, 0, 3, 'f', 'o', 'o'}, "UNKNOWN"},
		{udp("nope\r\n"), "UNKNOWN"},
		{[]byte{0, 7, 0, 0, 0, 2, 0, 0, 'g', 'e', 't', ' ', 'k', '\r', '\n'}, "UNKNOWN"},
	}
}

func checkMemcached(t *testing.T, dir string) {
	m := load(t, filepath.Join(dir, "c/memcached.wasm"))
	checkNames(t, m, memcachedNames)
	cases := memcachedCases()
	reqs := make([]request, len(cases))
	for i, c := range cases {
		reqs[i] = request{c.want, c.payload, memcachedType(t, c.want)}
		if got := memcached.Classify(c.payload); uint32(got) != reqs[i].want {
			t.Errorf("native classifier: %q is %s, want %s", c.payload, memcachedNames[got], c.want)
		}
	}
	runTable(t, m, reqs)
}

// respNames are the RESP classifier's types: app/redis's.
var respNames = redis.TypeNames()

// respArray encodes a command as a RESP array of bulk strings.
func respArray(args ...string) []byte {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

func respType(t testing.TB, name string) uint32 {
	for i, n := range respNames {
		if n == name {
			return uint32(i)
		}
	}
	t.Fatalf("no RESP type %q", name)
	return 0
}

// respRequests is the RESP table the native classifier and every Wasm one
// must pass: every command in three spellings and both framings, the
// sized commands at each size, requests cut by the prefix, malformed
// requests.
func respRequests(t testing.TB) []request {
	var reqs []request
	for id, name := range respNames[1:] {
		if strings.Contains(name, "_") {
			continue // a size, below
		}
		want := uint32(id + 1)
		lower := strings.ToLower(name)
		mixed := strings.ToUpper(lower[:1]) + lower[1:]
		reqs = append(reqs,
			request{"array " + name, respArray(name, "key", "1"), want},
			request{"array " + lower, respArray(lower, "key"), want},
			request{"inline " + name, []byte(name + " key\r\n"), want},
			request{"inline, no line end " + mixed, []byte(mixed), want},
		)
		if name != "MGET" && name != "SCAN" && name != "LRANGE" && name != "ZRANGE" && name != "ZREVRANGE" {
			reqs = append(reqs, request{"array, alone " + mixed, respArray(mixed), want})
		}
	}
	keys := func(n int) []string {
		k := []string{"MGET"}
		for i := range n {
			k = append(k, fmt.Sprint("k", i))
		}
		return k
	}
	long := strings.Repeat("p", 300)
	for _, c := range []struct {
		name    string
		payload []byte
		want    string
	}{
		{"MGET of 1 key", respArray(keys(1)...), "MGET"},
		{"MGET of 100 keys", respArray(keys(100)...), "MGET"},
		{"MGET of 101 keys", respArray(keys(101)...), "MGET_1K"},
		{"MGET of 1,000 keys", respArray(keys(1000)...), "MGET_1K"},
		{"MGET of 5,000 keys", respArray(keys(5000)...), "MGET_10K"},
		{"MGET of 20,000 keys", respArray(keys(20000)...), "MGET_BIG"},
		{"MGET inline of 3 keys", []byte("MGET a b c\r\n"), "MGET"},
		{"MGET inline cut by the prefix", []byte(strings.Join(keys(200), " ") + "\r\n"), "MGET_BIG"},
		{"SCAN default count", respArray("SCAN", "0"), "SCAN"},
		{"SCAN COUNT 100", respArray("SCAN", "0", "COUNT", "100"), "SCAN"},
		{"SCAN COUNT 1000", respArray("scan", "0", "count", "1000"), "SCAN_1K"},
		{"SCAN COUNT 10000", respArray("SCAN", "0", "COUNT", "10000"), "SCAN_10K"},
		{"SCAN COUNT 10001", respArray("SCAN", "0", "COUNT", "10001"), "SCAN_BIG"},
		{"SCAN MATCH COUNT TYPE", respArray("SCAN", "0", "MATCH", "k*", "COUNT", "5000", "TYPE", "string"), "SCAN_10K"},
		{"SCAN last COUNT", respArray("SCAN", "0", "COUNT", "5000", "COUNT", "5"), "SCAN"},
		{"SCAN COUNT not a number", respArray("SCAN", "0", "COUNT", "x"), "SCAN"},
		{"SCAN COUNT 0", respArray("SCAN", "0", "COUNT", "0"), "SCAN"},
		{"SCAN COUNT negative", respArray("SCAN", "0", "COUNT", "-5"), "SCAN"},
		{"SCAN COUNT without a value", respArray("SCAN", "0", "COUNT"), "SCAN"},
		{"SCAN unknown option", respArray("SCAN", "0", "FOO", "1"), "SCAN"},
		{"SCAN with COUNT past the prefix", respArray("SCAN", "0", "MATCH", long, "COUNT", "10"), "SCAN_BIG"},
		{"SCAN inline COUNT 10000", []byte("SCAN 0 COUNT 10000\r\n"), "SCAN_10K"},
		{"SCAN inline", []byte("scan 0\n"), "SCAN"},
		{"SCAN inline cut", []byte("SCAN 0 MATCH " + long), "SCAN_BIG"},
		{"LRANGE 0 99", respArray("LRANGE", "l", "0", "99"), "LRANGE"},
		{"LRANGE 0 100", respArray("LRANGE", "l", "0", "100"), "LRANGE_1K"},
		{"LRANGE 5 1", respArray("LRANGE", "l", "5", "1"), "LRANGE"},
		{"LRANGE -600 -1", respArray("LRANGE", "l", "-600", "-1"), "LRANGE_1K"},
		{"LRANGE 0 -1", respArray("LRANGE", "l", "0", "-1"), "LRANGE_BIG"},
		{"LRANGE 0 9999", respArray("LRANGE", "l", "0", "9999"), "LRANGE_10K"},
		{"LRANGE 0 x", respArray("LRANGE", "l", "0", "x"), "LRANGE"},
		{"LRANGE huge index", respArray("LRANGE", "l", "0", "999999999999999999"), "LRANGE_BIG"},
		{"LRANGE indexes past the prefix", respArray("LRANGE", long, "0", "1"), "LRANGE_BIG"},
		{"LRANGE missing stop", respArray("LRANGE", "l", "0"), "LRANGE"},
		{"ZRANGE 0 9999", respArray("ZRANGE", "z", "0", "9999"), "ZRANGE_10K"},
		{"ZRANGE 0 9 WITHSCORES", respArray("ZRANGE", "z", "0", "9", "WITHSCORES"), "ZRANGE"},
		{"ZRANGE 0 9 REV", respArray("zrange", "z", "0", "9", "rev"), "ZRANGE"},
		{"ZRANGE BYSCORE", respArray("ZRANGE", "z", "0", "9", "BYSCORE"), "ZRANGE_BIG"},
		{"ZRANGE BYLEX", respArray("ZRANGE", "z", "[a", "[b", "bylex"), "ZRANGE_BIG"},
		{"ZRANGE options past the prefix", respArray("ZRANGE", "z", "0", "9", long), "ZRANGE_BIG"},
		{"ZREVRANGE 0 -1", respArray("ZREVRANGE", "z", "0", "-1"), "ZREVRANGE_BIG"},
		{"ZREVRANGE 0 500", respArray("ZREVRANGE", "z", "0", "500"), "ZREVRANGE_1K"},
		{"ZRANGE inline 0 9999", []byte("ZRANGE z 0 9999\r\n"), "ZRANGE_10K"},
		{"KEYS", respArray("KEYS", "*"), "KEYS"},
		{"SET with a large value", respArray("SET", "k", strings.Repeat("v", 1000)), "SET"},
		{"GET with a key past the prefix", respArray("GET", long), "GET"},
		{"inline with leading spaces", []byte("  GET key\r\n"), "GET"},
	} {
		reqs = append(reqs, request{c.name, c.payload, respType(t, c.want)})
	}
	for _, bad := range []string{
		"",
		"*",
		"*0\r\n",
		"*1\r\n",
		"*x\r\n$3\r\nGET\r\n",
		"*1\r\n$3\r\nGE",                      // name cut short
		"*1\r\n$0\r\n\r\n",                    // empty name
		"*1\r\n$20\r\nGETGETGETGETGETGET\r\n", // length past the name
		"*1\r\n$3GET\r\n",                     // no line end after the length
		"*1\r\n:3\r\nGET\r\n",                 // not a bulk string
		"*1\r\n$3\r\nGETxx",                   // no line end after the name
		"*1\r\n$3\r\nGEX\r\n",
		"*1\r\n$7\r\nUNKNOWN\r\n",
		"*1\r\n$4\r\nGETX\r\n",
		"*1\r\n$17\r\nZRANGEBYSCOREXXXX\r\n",
		"*1\r\n$4\r\nSYNC\r\n",
		"*1\r\n$4\r\nEVAL\r\n",
		"$3\r\nGET\r\n",
		"GE key\r\n",
		"GETX key\r\n",
		"\r\n",
		"ZRANGEBYSCOREXXXXXXX 0 1\r\n",
		"G\x00T key\r\n",
		strings.Repeat("G", 300),
	} {
		reqs = append(reqs, request{fmt.Sprintf("malformed %q", bad), []byte(bad), 0})
	}
	return reqs
}

// respModules are the RESP classifier in every guest language.
var respModules = []string{"c/resp.wasm", "rust/resp.wasm"}

func TestRESP(t *testing.T) { checkRESP(t, ".") }

func checkRESP(t *testing.T, dir string) {
	reqs := respRequests(t)
	for _, r := range reqs {
		if got := redis.Classify(r.payload); uint32(got) != r.want {
			t.Errorf("native classifier: %s %.60q is %s, want %s", r.name, r.payload, respNames[got], respNames[r.want])
		}
	}
	for _, path := range respModules {
		t.Run(path, func(t *testing.T) {
			m := load(t, filepath.Join(dir, path))
			checkNames(t, m, respNames)
			runTable(t, m, reqs)
		})
	}
}

func TestRandom(t *testing.T) { checkRandom(t, ".") }

// checkRandom asserts that the random classifier gives SHORT or LONG to
// every request, about half each, the same type to the same request, and
// the same answers in batches as one by one.
func checkRandom(t *testing.T, dir string) {
	m := load(t, filepath.Join(dir, "c/random.wasm"))
	checkNames(t, m, pspHeaderNames)
	inst := newInstance(t, m)
	const n = 20000
	payloads := make([][]byte, n)
	single := make([]uint32, n)
	var counts [12]int
	for i := range payloads {
		// The real type is always SHORT: the classifier must ignore it.
		payloads[i] = header(uint32(i), wire.TypeShort, 0)
		single[i] = inst.Classify(payloads[i])
		if single[i] >= uint32(len(counts)) {
			t.Fatalf("request %d: type %d out of range", i, single[i])
		}
		counts[single[i]]++
	}
	if counts[wire.TypeShort]+counts[wire.TypeLong] != n {
		t.Fatalf("types other than SHORT and LONG: %v", counts)
	}
	// Binomial(20000, 1/2): sd = 71; 6 sd = 426.
	if d := counts[wire.TypeShort] - n/2; d < -426 || d > 426 {
		t.Errorf("SHORT %d, LONG %d of %d: not uniform", counts[wire.TypeShort], counts[wire.TypeLong], n)
	}
	// Consecutive ids must not alternate or repeat in a pattern: count runs.
	runs := 1
	for i := 1; i < n; i++ {
		if single[i] != single[i-1] {
			runs++
		}
	}
	if runs < n/2-426 || runs > n/2+426 {
		t.Errorf("%d runs of equal types in %d requests, want about %d", runs, n, n/2)
	}
	batch := make([]uint32, n)
	inst.ClassifyBatch(payloads, batch)
	for i := range batch {
		if batch[i] != single[i] {
			t.Fatalf("request %d: batch type %d, single type %d", i, batch[i], single[i])
		}
	}
	if f := inst.Faults(); f.Total() != 0 {
		t.Errorf("faults: %+v, want none", f)
	}
}

// hostileLoad lists the hostile modules the host must refuse to load, with
// the error they must wrap and a word the message must contain.
var hostileLoad = []struct {
	path    string
	err     error
	mention string
}{
	{"hostile/imports.wasm", wasmclass.ErrForbiddenImport, "now"},
	{"hostile/badsignature.wasm", wasmclass.ErrBadABI, "psp_classify"},
	{"hostile/badversion.wasm", wasmclass.ErrBadABI, "2"},
	{"hostile/hugememory.wasm", wasmclass.ErrMemoryLimit, "256"},
}

func TestHostileRefused(t *testing.T) { checkHostileRefused(t, ".") }

func checkHostileRefused(t *testing.T, dir string) {
	for _, h := range hostileLoad {
		t.Run(filepath.Base(h.path), func(t *testing.T) {
			_, err := loadOpts(t, filepath.Join(dir, h.path), wasmclass.Options{})
			if !errors.Is(err, h.err) {
				t.Fatalf("load: %v, want an error wrapping %v", err, h.err)
			}
			if !strings.Contains(err.Error(), h.mention) {
				t.Errorf("load: %q does not mention %q", err, h.mention)
			}
		})
	}
}

func TestHostileContained(t *testing.T) { checkHostileContained(t, ".") }

// checkHostileContained runs each misbehaving module on a batch and on a
// single packet and asserts that the host answered UNKNOWN and counted the
// right fault, and that the calls returned.
func checkHostileContained(t *testing.T, dir string) {
	payloads := [][]byte{header(1, 1, 0), header(2, 2, 0), header(3, 1, 0), header(4, 2, 0)}
	for _, h := range []struct {
		path  string
		fault func(wasmclass.FaultCounts) uint64
	}{
		{"hostile/loop.wasm", func(f wasmclass.FaultCounts) uint64 { return f.Fuel }},
		// Runaway recursion ends in a stack overflow or out of fuel,
		// whichever comes first.
		{"hostile/recursion.wasm", func(f wasmclass.FaultCounts) uint64 { return f.Trap + f.Fuel }},
		{"hostile/trap.wasm", func(f wasmclass.FaultCounts) uint64 { return f.Trap }},
		{"hostile/outofrange.wasm", func(f wasmclass.FaultCounts) uint64 { return f.OutOfRange }},
	} {
		t.Run(filepath.Base(h.path), func(t *testing.T) {
			m := load(t, filepath.Join(dir, h.path))
			inst := newInstance(t, m)
			out := []uint32{9, 9, 9, 9}
			inst.ClassifyBatch(payloads, out)
			for i, typ := range out {
				if typ != 0 {
					t.Errorf("batch packet %d: type %d, want 0 (UNKNOWN)", i, typ)
				}
			}
			if got := h.fault(inst.Faults()); got != uint64(len(payloads)) {
				t.Errorf("after a batch of %d: faults %+v, want %d of the module's kind", len(payloads), inst.Faults(), len(payloads))
			}
			if typ := inst.Classify(payloads[0]); typ != 0 {
				t.Errorf("Classify: type %d, want 0 (UNKNOWN)", typ)
			}
			// After a trap the next call takes a spare instance, which may
			// still be in the making: then the packet is unavailable.
			if f := inst.Faults(); h.fault(f)+f.Unavailable != uint64(len(payloads))+1 {
				t.Errorf("after one more packet: faults %+v, want %d of the module's kind (or unavailable)", f, len(payloads)+1)
			}
		})
	}

	t.Run("badcount.wasm", func(t *testing.T) {
		m := load(t, filepath.Join(dir, "hostile/badcount.wasm"))
		inst := newInstance(t, m)
		out := []uint32{9, 9, 9, 9}
		inst.ClassifyBatch(payloads, out)
		if (out[0] | out[1] | out[2] | out[3]) != 0 {
			t.Errorf("batch with a bad count: types %v, want all 0 (UNKNOWN)", out)
		}
		if f := inst.Faults(); f.BadCount != uint64(len(payloads)) {
			t.Errorf("faults %+v, want BadCount %d", f, len(payloads))
		}
		// Its single-packet export is well-behaved.
		if typ := inst.Classify(payloads[0]); typ != 1 {
			t.Errorf("Classify: type %d, want 1", typ)
		}
	})

	t.Run("membomb.wasm", func(t *testing.T) {
		// With the default budget, the module's grow-one-page loop only
		// finishes if the host's page limit makes memory.grow fail early
		// (after at most 64 pages, not 65536); failed growths cost little.
		m, err := loadOpts(t, filepath.Join(dir, "hostile/membomb.wasm"), wasmclass.Options{})
		if err != nil {
			t.Fatal(err)
		}
		inst := newInstance(t, m)
		if typ := inst.Classify(payloads[0]); typ != 1 {
			t.Errorf("Classify: type %d, want 1 (the bomb returns SHORT once memory.grow fails)", typ)
		}
		out := make([]uint32, len(payloads))
		inst.ClassifyBatch(payloads, out)
		for i, typ := range out {
			if typ != 1 {
				t.Errorf("batch packet %d: type %d, want 1", i, typ)
			}
		}
		if f := inst.Faults(); f.Total() != 0 {
			t.Errorf("faults %+v, want none", f)
		}
	})
}

// TestRebuildMatchesCommitted rebuilds every example from source with
// `make classifiers` into a temporary directory, checks that the committed
// modules are byte-identical to the rebuilt ones, and runs every test table
// on the rebuilt modules. It needs the guest toolchains (skipped without
// them, except in CI).
func TestRebuildMatchesCommitted(t *testing.T) {
	if testing.Short() {
		t.Skip("rebuilds every classifier: skipped in -short mode")
	}
	for _, tool := range []string{"make", "clang", "wasm-ld", "wat2wasm", "/usr/bin/rustc", "node", "npm", "go"} {
		testenv.RequireTool(t, tool)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command("make", "-C", root, "classifiers", "OUT="+out, "BUILD="+filepath.Join(out, ".build"))
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make classifiers: %v\n%s", err, output)
	}

	committed, err := filepath.Glob("*/*.wasm")
	if err != nil || len(committed) < 15 {
		t.Fatalf("found %d committed modules (%v)", len(committed), err)
	}
	goVersion := toolGoVersion(t)
	for _, path := range committed {
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(out, path))
		if err != nil {
			t.Errorf("%s was not rebuilt: %v", path, err)
			continue
		}
		if bytes.Equal(got, want) {
			continue
		}
		// Go embeds its version: a different Go release builds a different
		// (equally valid) module.
		if built := goVersionIn(want); built != "" && built != goVersion {
			t.Logf("%s differs from its rebuild: committed with %s, rebuilt with %s", path, built, goVersion)
			continue
		}
		t.Errorf("%s differs from its rebuild (%d bytes committed, %d rebuilt): run make classifiers and commit the result", path, len(want), len(got))
	}

	t.Run("WATTemplate", func(t *testing.T) {
		// The WAT template classifies the psp header with three types.
		wasm := filepath.Join(out, "template.wasm")
		if output, err := exec.Command("wat2wasm", filepath.Join(root, "sdk/wat/template.wat"), "-o", wasm).CombinedOutput(); err != nil {
			t.Fatalf("wat2wasm: %v\n%s", err, output)
		}
		m := load(t, wasm)
		checkNames(t, m, pspHeaderNames[:3])
		var reqs []request
		for _, r := range pspHeaderRequests() {
			if r.want > 2 {
				r.want = 0
			}
			reqs = append(reqs, r)
		}
		runTable(t, m, reqs)
	})
	t.Run("PSPHeader", func(t *testing.T) { checkPSPHeader(t, out) })
	t.Run("Memcached", func(t *testing.T) { checkMemcached(t, out) })
	t.Run("RESP", func(t *testing.T) { checkRESP(t, out) })
	t.Run("KV", func(t *testing.T) { checkKV(t, out) })
	t.Run("Random", func(t *testing.T) { checkRandom(t, out) })
	t.Run("HostileRefused", func(t *testing.T) { checkHostileRefused(t, out) })
	t.Run("HostileContained", func(t *testing.T) { checkHostileContained(t, out) })
}

var goVersionRE = regexp.MustCompile(`go1\.[0-9]+(\.[0-9]+)?`)

// goVersionIn returns the Go release a module was built with, or "" for a
// module not built by Go.
func goVersionIn(wasm []byte) string {
	return string(goVersionRE.Find(wasm))
}

func toolGoVersion(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		t.Fatalf("go env GOVERSION: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func TestKV(t *testing.T) { checkKV(t, ".") }

// checkKV runs kv requests through c/kv.wasm and checks each answer against
// both the table and the kv application's native classifier.
func checkKV(t *testing.T, dir string) {
	m := load(t, filepath.Join(dir, "c/kv.wasm"))
	checkNames(t, m, pspHeaderNames)
	encode := func(r kv.Request) []byte {
		b := make([]byte, wire.HeaderLen+len(r.Key))
		return b[:kv.Encode(b, r)]
	}
	long := bytes.Repeat([]byte("k"), kv.MaxKeyLen)
	reqs := []request{
		{"GET", encode(kv.Request{ID: 1, Op: wire.TypeGet, Key: kv.Key(42)}), wire.TypeGet},
		{"SCAN", encode(kv.Request{ID: 2, Op: wire.TypeScan, Key: kv.Key(0)}), wire.TypeScan},
		{"SCAN of 100", encode(kv.Request{ID: 3, Op: wire.TypeScan, Count: 100, Key: kv.Key(7)}), wire.TypeScan},
		{"SCAN of the most keys", encode(kv.Request{ID: 4, Op: wire.TypeScan, Count: kv.MaxScanCount, Key: kv.Key(7)}), wire.TypeScan},
		{"GET of the longest key (cut to the prefix)", encode(kv.Request{ID: 5, Op: wire.TypeGet, Key: long}), wire.TypeGet},
		{"GET of a 1-byte key", encode(kv.Request{ID: 6, Op: wire.TypeGet, Key: []byte("x")}), wire.TypeGet},
		{"GET without a key", encode(kv.Request{ID: 7, Op: wire.TypeGet}), wire.TypeUnknown},
		{"GET of a key too long", encode(kv.Request{ID: 8, Op: wire.TypeGet, Key: append(long, 'k')}), wire.TypeUnknown},
		{"GET with a count", encode(kv.Request{ID: 9, Op: wire.TypeGet, Count: 1, Key: kv.Key(1)}), wire.TypeUnknown},
		{"SCAN of too many keys", encode(kv.Request{ID: 10, Op: wire.TypeScan, Count: kv.MaxScanCount + 1, Key: kv.Key(1)}), wire.TypeUnknown},
		{"SHORT", encode(kv.Request{ID: 11, Op: wire.TypeShort, Key: kv.Key(1)}), wire.TypeUnknown},
		{"type 12", encode(kv.Request{ID: 12, Op: 12, Key: kv.Key(1)}), wire.TypeUnknown},
		{"15 bytes", encode(kv.Request{ID: 13, Op: wire.TypeGet})[:15], wire.TypeUnknown},
		{"empty", nil, wire.TypeUnknown},
	}
	var native kv.Classifier
	payloads := make([][]byte, len(reqs))
	for i, r := range reqs {
		payloads[i] = r.payload
	}
	nativeOut := make([]app.Type, len(reqs))
	native.ClassifyBatch(payloads, nativeOut)
	for i, r := range reqs {
		if uint32(nativeOut[i]) != r.want {
			t.Errorf("table entry %q: want %d, but kv.Classifier says %d", r.name, r.want, nativeOut[i])
		}
	}
	runTable(t, m, reqs)
}
