package memcached

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// collector takes a reply's leading datagrams.
type collector struct{ dgs [][]byte }

func (c *collector) Send(p []byte) error {
	c.dgs = append(c.dgs, bytes.Clone(p))
	return nil
}

// exchange runs one request body on worker w's session and returns the
// reply datagrams (frame headers included).
func exchange(srv *Server, w int, body string) [][]byte {
	ss := srv.sessions[w]
	var c collector
	ss.dg.reset(42, &c)
	ss.serve([]byte(body))
	if ss.dg.n > 0 {
		c.dgs = append(c.dgs, bytes.Clone(ss.dg.held[:ss.dg.n]))
	}
	return c.dgs
}

// text returns the bodies of the datagrams, concatenated.
func text(dgs [][]byte) string {
	var b strings.Builder
	for _, d := range dgs {
		b.Write(d[UDPHeaderLen:])
	}
	return b.String()
}

func expect(t *testing.T, srv *Server, body, want string) {
	t.Helper()
	if got := text(exchange(srv, 0, body)); got != want {
		t.Errorf("%q:\n got %q\nwant %q", body, got, want)
	}
}

// TestNothingStoredHalfWay: a storage command whose data block is missing,
// short or badly terminated stores nothing.
func TestNothingStoredHalfWay(t *testing.T) {
	srv := openServer(t, Config{})
	// The data block ends before the datagram does: no reply at all (like
	// memcached, which holds its replies while it waits for the rest),
	// the complete set before it is applied, the incomplete one is not.
	expect(t, srv, "set a 0 0 1\r\nx\r\nset b 0 0 5\r\nab", "")
	expect(t, srv, "get a b\r\n", "VALUE a 0 1\r\nx\r\nEND\r\n")
	expect(t, srv, "set b 0 0 5\r\nabcdefg\r\nget b\r\n", "CLIENT_ERROR bad data chunk\r\nERROR\r\nEND\r\n")
	expect(t, srv, "set b 0 0 5\r\nabcde\n\nget b\r\n", "CLIENT_ERROR bad data chunk\r\nEND\r\n")
	expect(t, srv, "set b 0 0 5\r\nabc", "")
	expect(t, srv, "append a 0 0 3\r\nyy", "")
	expect(t, srv, "get a b\r\n", "VALUE a 0 1\r\nx\r\nEND\r\n")
}

// TestItemSizeLimit checks the item size limit at the boundaries measured
// on memcached 1.6.18 (default -I 1m, over TCP): key "a" with flags 0 takes
// a 1048516-byte value and refuses 1048517; flags other than 0 cost 4 bytes.
// A set refused as too large also deletes the key and skips its data.
func TestItemSizeLimit(t *testing.T) {
	srv := openServer(t, Config{})
	set := func(key string, flags, n int) string {
		return fmt.Sprintf("set %s %d 0 %d\r\n%s\r\n", key, flags, n, strings.Repeat("v", n))
	}
	expect(t, srv, set("a", 0, 1048516), "STORED\r\n")
	expect(t, srv, set("a", 0, 1048517), "SERVER_ERROR object too large for cache\r\n")
	expect(t, srv, set("bb", 0, 1048515), "STORED\r\n")
	expect(t, srv, set("bb", 0, 1048516), "SERVER_ERROR object too large for cache\r\n")
	expect(t, srv, set("c", 1, 1048512), "STORED\r\n")
	expect(t, srv, set("c", 1, 1048513), "SERVER_ERROR object too large for cache\r\n")
	expect(t, srv, "get a bb\r\n", "END\r\n")
	expect(t, srv, "set d 0 0 1\r\nx\r\n"+set("d", 0, 2000000)+"get d\r\n", "STORED\r\nSERVER_ERROR object too large for cache\r\nEND\r\n")
	// add/replace refused as too large keep the old value.
	expect(t, srv, "set e 0 0 1\r\nx\r\n"+strings.Replace(set("e", 0, 2000000), "set", "replace", 1)+"get e\r\n",
		"STORED\r\nSERVER_ERROR object too large for cache\r\nVALUE e 0 1\r\nx\r\nEND\r\n")
	// An append that would grow the item past the limit is not stored.
	expect(t, srv, set("f", 0, 1048000)+strings.Replace(set("f", 0, 1000), "set", "append", 1),
		"STORED\r\nNOT_STORED\r\n")
	expect(t, srv, "get f\r\n", "VALUE f 0 1048000\r\n"+strings.Repeat("v", 1048000)+"\r\nEND\r\n")
	// A smaller limit is honoured.
	small := openServer(t, Config{MaxItemSize: 2048})
	expect(t, small, set("a", 0, 1988), "STORED\r\n")
	expect(t, small, set("a", 0, 1989), "SERVER_ERROR object too large for cache\r\n")
}

// TestExpiryAndFlush moves the server's clock.
func TestExpiryAndFlush(t *testing.T) {
	srv := openServer(t, Config{})
	now := int64(1_700_000_000)
	srv.clock = func() int64 { return now }
	expect(t, srv, "set a 0 10 1\r\nx\r\nset b 0 0 1\r\ny\r\nset c 0 1700000100 1\r\nz\r\n", "STORED\r\nSTORED\r\nSTORED\r\n")
	now += 9
	expect(t, srv, "get a b c\r\n", "VALUE a 0 1\r\nx\r\nVALUE b 0 1\r\ny\r\nVALUE c 0 1\r\nz\r\nEND\r\n")
	now++
	expect(t, srv, "get a b c\r\n", "VALUE b 0 1\r\ny\r\nVALUE c 0 1\r\nz\r\nEND\r\n")
	expect(t, srv, "add a 0 0 1\r\nw\r\nget a\r\n", "STORED\r\nVALUE a 0 1\r\nw\r\nEND\r\n")
	expect(t, srv, "touch b 5\r\n", "TOUCHED\r\n")
	now += 100
	expect(t, srv, "get a b c\r\n", "VALUE a 0 1\r\nw\r\nEND\r\n")
	// A delayed flush_all: nothing happens until its time, then every
	// item stored before it is gone; items stored after it stay.
	expect(t, srv, "flush_all 10\r\nget a\r\n", "OK\r\nVALUE a 0 1\r\nw\r\nEND\r\n")
	now += 5
	expect(t, srv, "get a\r\n", "VALUE a 0 1\r\nw\r\nEND\r\n")
	now += 5
	expect(t, srv, "get a\r\n", "END\r\n")
	now++
	expect(t, srv, "set a 0 0 1\r\nv\r\nget a\r\n", "STORED\r\nVALUE a 0 1\r\nv\r\nEND\r\n")
	// A flush_all at a time before the server started flushes nothing and
	// cancels a delayed one, as memcached's (its oldest_live becomes 0).
	expect(t, srv, "flush_all 10\r\nflush_all 1000000000\r\nget a\r\n", "OK\r\nOK\r\nVALUE a 0 1\r\nv\r\nEND\r\n")
	now += 20
	expect(t, srv, "get a\r\n", "VALUE a 0 1\r\nv\r\nEND\r\n")
}

// TestPersistence: what is set in a data directory is there after a
// restart, with its flags, expiry and CAS id; new CAS ids do not reuse old
// ones, and a flush_all survives the restart too.
func TestPersistence(t *testing.T) {
	dir := t.TempDir()
	srv, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, srv, "set a 7 0 5\r\nhello\r\nset b 0 0 1\r\nx\r\nset gone 0 -1 1\r\nx\r\n", "STORED\r\nSTORED\r\nSTORED\r\n")
	before := text(exchange(srv, 0, "gets a b\r\n"))
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	srv, err = Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(exchange(srv, 0, "gets a b gone\r\n")); got != before {
		t.Errorf("after a restart: %q, want %q", got, before)
	}
	expect(t, srv, "set c 0 0 1\r\ny\r\n", "STORED\r\n")
	var casA, casC uint64
	fmt.Sscanf(text(exchange(srv, 0, "gets a\r\n")), "VALUE a 7 5 %d", &casA)
	fmt.Sscanf(text(exchange(srv, 0, "gets c\r\n")), "VALUE c 0 1 %d", &casC)
	if casC <= casA {
		t.Errorf("CAS id %d after the restart, not above %d from before", casC, casA)
	}
	expect(t, srv, "flush_all\r\n", "OK\r\n")
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	srv = openServer(t, Config{Dir: dir})
	expect(t, srv, "get a b c\r\n", "END\r\n")
}

// TestConcurrentWriters: workers incrementing and appending to the same
// keys lose no update.
func TestConcurrentWriters(t *testing.T) {
	const workers, rounds = 4, 200
	srv := openServer(t, Config{Workers: workers})
	expect(t, srv, "set n 0 0 1\r\n0\r\nset s 0 0 0\r\n\r\n", "STORED\r\nSTORED\r\n")
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if got := text(exchange(srv, w, "incr n 1\r\nappend s 0 0 1\r\nx\r\n")); !strings.HasSuffix(got, "\r\nSTORED\r\n") {
					t.Errorf("worker %d: %q", w, got)
					return
				}
			}
		}()
	}
	wg.Wait()
	want := workers * rounds
	expect(t, srv, "get n\r\n", fmt.Sprintf("VALUE n 0 %d\r\n%d\r\nEND\r\n", len(fmt.Sprint(want)), want))
	if got := text(exchange(srv, 0, "get s\r\n")); !strings.HasPrefix(got, fmt.Sprintf("VALUE s 0 %d\r\n", want)) {
		t.Errorf("appended value: %.40q, want %d bytes", got, want)
	}
}

// TestStats: counters add up over workers and reset.
func TestStats(t *testing.T) {
	srv := openServer(t, Config{Workers: 2})
	exchange(srv, 0, "set a 0 0 1\r\nx\r\nget a b\r\n")
	exchange(srv, 1, "get a\r\ndelete b\r\n")
	got := text(exchange(srv, 0, "stats\r\n"))
	for _, want := range []string{"STAT version " + Version + "\r\n", "STAT cmd_get 3\r\n", "STAT get_hits 2\r\n", "STAT get_misses 1\r\n", "STAT cmd_set 1\r\n", "STAT delete_misses 1\r\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("stats lack %q:\n%s", want, got)
		}
	}
	if !strings.HasSuffix(got, "END\r\n") {
		t.Errorf("stats do not end with END: %q", got)
	}
	expect(t, srv, "stats reset\r\n", "RESET\r\n")
	if got := text(exchange(srv, 1, "stats\r\n")); !strings.Contains(got, "STAT cmd_get 0\r\n") {
		t.Errorf("after a reset: %q", got)
	}
	expect(t, srv, "stats slabs\r\nstats detail\r\nstats nope\r\n", "END\r\nCLIENT_ERROR usage: stats detail on|off|dump\r\nERROR\r\n")
}

// TestDatagramFraming checks the split of long responses.
func TestDatagramFraming(t *testing.T) {
	srv := openServer(t, Config{})
	v := strings.Repeat("z", 5000)
	exchange(srv, 0, "set k 0 0 5000\r\n"+v+"\r\n")
	dgs := exchange(srv, 0, "get k\r\n")
	msg := "VALUE k 0 5000\r\n" + v + "\r\nEND\r\n"
	total := (len(msg) + udpDataSize - 1) / udpDataSize
	if len(dgs) != total {
		t.Fatalf("%d datagrams, want %d", len(dgs), total)
	}
	for i, d := range dgs {
		h, _ := ParseFrameHeader(d)
		if h.RequestID != 42 || int(h.Seq) != i || int(h.Total) != total || h.Reserved != 0 || len(d) > UDPMaxPayload {
			t.Errorf("datagram %d: header %+v, %d bytes", i, h, len(d))
		}
	}
	if text(dgs) != msg {
		t.Errorf("reassembled reply differs")
	}
}

// TestStatsStoreLimit: stats report the store's bound as memcached reports
// its memory limit (limit_maxbytes, and maxbytes in stats settings), 0
// when unbounded, the bytes of its items as memcached sizes them (bytes),
// and the bytes it held at its last reading when bounded (store_bytes).
func TestStatsStoreLimit(t *testing.T) {
	srv := openServer(t, Config{StoreMemory: MinStoreMemory})
	exchange(srv, 0, "set a 0 0 1\r\nx\r\n")
	got := text(exchange(srv, 0, "stats\r\n"))
	for _, want := range []string{fmt.Sprintf("STAT limit_maxbytes %d\r\n", MinStoreMemory), "STAT bytes 61\r\n", "STAT store_bytes "} {
		if !strings.Contains(got, want) {
			t.Errorf("stats lack %q:\n%s", want, got)
		}
	}
	if got := text(exchange(srv, 0, "stats settings\r\n")); !strings.Contains(got, fmt.Sprintf("STAT maxbytes %d\r\n", MinStoreMemory)) {
		t.Errorf("stats settings: %q", got)
	}
	unbounded := openServer(t, Config{StoreMemory: -1})
	got = text(exchange(unbounded, 0, "stats\r\n"))
	if !strings.Contains(got, "STAT limit_maxbytes 0\r\n") || strings.Contains(got, "STAT store_bytes ") {
		t.Errorf("unbounded store's stats:\n%s", got)
	}
}
