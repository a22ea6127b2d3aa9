package memcached

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/app/memcached/memcachedtest"
)

// TestStatsConformance sends each StatCase over TCP to a fresh memcached
// 1.6.18 and a fresh psp, then compares their item and command stats.
func TestStatsConformance(t *testing.T) {
	for _, c := range memcachedtest.StatCases {
		t.Run(strings.ReplaceAll(c.Name, " ", "_"), func(t *testing.T) {
			// Without its LRU maintainer and crawler, memcached removes an
			// expired item when it is read or its memory is needed, as psp.
			mc := memcachedtest.StartMemcached(t, false, "-o", "no_lru_maintainer,no_lru_crawler")
			psp := serveTCP(t, openServer(t, Config{}))
			for i, r := range c.Requests {
				want, err := memcachedtest.ExchangeTCP(mc, r, 5*time.Second)
				if err != nil {
					t.Fatalf("request %d: memcached: %v", i, err)
				}
				got, err := memcachedtest.ExchangeTCP(psp, r, 5*time.Second)
				if err != nil {
					t.Fatalf("request %d: psp: %v", i, err)
				}
				if string(got) != string(want) {
					t.Errorf("request %d %.60q:\npsp:       %.200q\nmemcached: %.200q", i, r, got, want)
				}
			}
			want, err := memcachedtest.ExchangeTCP(mc, "stats\r\n", 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			got, err := memcachedtest.ExchangeTCP(psp, "stats\r\n", 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range memcachedtest.CompareStats(got, want, c.Stats...) {
				t.Error(d)
			}
		})
	}
}

// TestConnStatsConformance: past the connection limit, a connection gets
// memcached's line and closes; stats count the connections open and those
// refused as memcached 1.6.18 does, and a connection that sent 30 commands
// at once yielded once (conn_yields); stats conns lists the connections,
// the asking one as conn_parse_cmd and the others as conn_read.
func TestConnStatsConformance(t *testing.T) {
	mc := memcachedtest.StartMemcached(t, false, "-c", "40")
	// memcached keeps some of its -c for itself: find how many it takes.
	open := func(addr string, n int) (conns []net.Conn, refused int) {
		for range n {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			c.SetDeadline(time.Now().Add(5 * time.Second))
			c.Write([]byte("version\r\n"))
			line, err := bufio.NewReader(c).ReadString('\n')
			switch {
			case line == "ERROR Too many open connections\r\n":
				refused++
			case strings.HasPrefix(line, "VERSION "):
				conns = append(conns, c)
			default:
				t.Fatalf("connection %d: %q, %v", n, line, err)
			}
		}
		return conns, refused
	}
	mcConns, mcRefused := open(mc, 40)
	if mcRefused == 0 || len(mcConns) < 2 {
		t.Fatalf("memcached -c 40 took %d connections, refused %d", len(mcConns), mcRefused)
	}
	srv := openServer(t, Config{MaxConns: len(mcConns)})
	pspConns, pspRefused := open(serveTCPConns(t, srv, len(mcConns)), 40)
	if len(pspConns) != len(mcConns) || pspRefused != mcRefused {
		t.Fatalf("psp took %d connections and refused %d; memcached %d and %d", len(pspConns), pspRefused, len(mcConns), mcRefused)
	}
	ask := func(c net.Conn, body string) string {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write([]byte(body + "version\r\n"))
		var out []byte
		buf := make([]byte, 64<<10)
		for !bytes.Contains(out, []byte("VERSION ")) {
			n, err := c.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, buf[:n]...)
		}
		return string(out)
	}
	for _, cs := range [][]net.Conn{mcConns, pspConns} {
		ask(cs[1], strings.Repeat("mn\r\n", 30))
	}
	want, got := ask(mcConns[0], "stats\r\n"), ask(pspConns[0], "stats\r\n")
	for _, d := range memcachedtest.CompareStats([]byte(got), []byte(want), "curr_connections", "rejected_connections", "conn_yields") {
		t.Error(d)
	}
	if s := memcachedtest.ParseStats([]byte(got)); s["max_connections"] != strconv.Itoa(len(mcConns)) || s["total_connections"] != strconv.Itoa(len(mcConns)) {
		t.Errorf("psp: max_connections %s and total_connections %s, want %d (memcached counts its listener too)", s["max_connections"], s["total_connections"], len(mcConns))
	}
	// stats conns: memcached also lists its listener and each
	// connection's listen_addr, which psp's framers do not see.
	states := func(reply string) map[string]int {
		m := map[string]int{}
		for _, line := range strings.Split(reply, "\r\n") {
			if f := strings.Fields(line); len(f) == 3 && strings.HasSuffix(f[1], ":state") {
				m[f[2]]++
			}
		}
		return m
	}
	wantStates, gotStates := states(ask(mcConns[0], "stats conns\r\n")), states(ask(pspConns[0], "stats conns\r\n"))
	delete(wantStates, "conn_listening")
	if fmt.Sprint(gotStates) != fmt.Sprint(wantStates) {
		t.Errorf("stats conns states: psp %v, memcached %v", gotStates, wantStates)
	}
}

// TestConnStatsHook: with Config.Connections and ListConnections, stats
// report what the server says of its connections and listeners.
func TestConnStatsHook(t *testing.T) {
	srv := openServer(t, Config{
		Connections: func() ConnCounts {
			return ConnCounts{Current: 3, Total: 17, Rejected: 5, Yields: 2, Max: 64}
		},
		ListConnections: func(yield func(ConnInfo) bool) {
			_ = yield(ConnInfo{ID: 4, Listener: true, Addr: "tcp:127.0.0.1:11211"}) &&
				yield(ConnInfo{ID: 9, Addr: "tcp:127.0.0.1:40000", Local: "tcp:127.0.0.1:11211", Busy: true}) &&
				yield(ConnInfo{ID: 12, Addr: "tcp:[::1]:40001", Local: "tcp:[::1]:11211", Idle: 90 * time.Second})
		},
	})
	stats := text(exchange(srv, 0, "stats\r\n"))
	for _, want := range []string{"STAT max_connections 64\r\n", "STAT curr_connections 3\r\n", "STAT total_connections 17\r\n",
		"STAT rejected_connections 5\r\n", "STAT conn_yields 2\r\n"} {
		if !strings.Contains(stats, want) {
			t.Errorf("stats lack %q", want)
		}
	}
	if got := text(exchange(srv, 0, "stats settings\r\n")); !strings.Contains(got, "STAT maxconns 64\r\n") {
		t.Errorf("stats settings lack maxconns 64")
	}
	expect(t, srv, "stats conns\r\n", "STAT 4:addr tcp:127.0.0.1:11211\r\nSTAT 4:state conn_listening\r\nSTAT 4:secs_since_last_cmd 0\r\n"+
		"STAT 9:addr tcp:127.0.0.1:40000\r\nSTAT 9:listen_addr tcp:127.0.0.1:11211\r\nSTAT 9:state conn_parse_cmd\r\nSTAT 9:secs_since_last_cmd 0\r\n"+
		"STAT 12:addr tcp:[::1]:40001\r\nSTAT 12:listen_addr tcp:[::1]:11211\r\nSTAT 12:state conn_read\r\nSTAT 12:secs_since_last_cmd 90\r\nEND\r\n")
}

// TestEvictionConformance fills memcached 1.6.18 (-m 16, as users run it:
// its LRU maintainer on) and psp (16 MiB of items, within a store of 128
// MiB) twice over with 8,000-byte values after items that expired: both
// reclaim the expired items, evict the least recently used ones (never
// refusing a set), keep a key read all along, and count it in stats.
func TestEvictionConformance(t *testing.T) {
	mc := memcachedtest.StartMemcached(t, false, "-m", "16")
	srv := openServer(t, Config{StoreMemory: MinStoreMemory})
	srv.st.itemBudget = 16 << 20 // the least bound's is 64 MiB: four times the sets
	psp := serveTCP(t, srv)
	const sets = 4200 // 33.6 MB of values
	value := strings.Repeat("v", 8000)
	for _, addr := range []string{mc, psp} {
		var b strings.Builder
		for i := range 200 {
			fmt.Fprintf(&b, "set x%d 0 1 %d\r\n%s\r\n", i, len(value), value)
		}
		if got, err := memcachedtest.ExchangeTCP(addr, b.String(), 5*time.Second); err != nil || strings.Count(string(got), "STORED\r\n") != 200 {
			t.Fatalf("%s: expiring sets: %v, %.80q", addr, err, got)
		}
	}
	time.Sleep(2500 * time.Millisecond) // memcached's clock ticks each second
	stats := map[string]map[string]string{}
	for _, addr := range []string{mc, psp} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		r := bufio.NewReader(c)
		// One round: sets without replies, then a get of the key read all
		// along; its reply says the sets before it were served.
		round := func(first, n int) string {
			c.SetDeadline(time.Now().Add(20 * time.Second))
			var b strings.Builder
			for i := first; i < first+n; i++ {
				fmt.Fprintf(&b, "set k%d 0 0 %d noreply\r\n%s\r\n", i, len(value), value)
			}
			b.WriteString("get hot\r\n")
			if _, err := c.Write([]byte(b.String())); err != nil {
				t.Fatal(err)
			}
			var reply strings.Builder
			for !strings.HasSuffix(reply.String(), "END\r\n") {
				line, err := r.ReadString('\n')
				if err != nil {
					t.Fatalf("%s: %v after %q", addr, err, reply.String())
				}
				reply.WriteString(line)
			}
			return reply.String()
		}
		c.Write([]byte("set hot 0 0 3\r\nhot\r\n"))
		if line, _ := r.ReadString('\n'); line != "STORED\r\n" {
			t.Fatalf("%s: set hot: %q", addr, line)
		}
		const per = 420
		for first := 0; first < sets; first += per {
			if got := round(first, per); got != "VALUE hot 0 3\r\nhot\r\nEND\r\n" {
				t.Fatalf("%s: after %d sets, get hot: %q", addr, first+per, got)
			}
		}
		got, err := memcachedtest.ExchangeTCP(addr, "get k0\r\nstats\r\n", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(got), "END\r\n") {
			t.Errorf("%s: k0, the least recently used, is still there", addr)
		}
		stats[addr] = memcachedtest.ParseStats(got)
	}
	num := func(addr, name string) int {
		n, _ := strconv.Atoi(stats[addr][name])
		return n
	}
	for _, addr := range []string{mc, psp} {
		who := map[string]string{mc: "memcached", psp: "psp"}[addr]
		t.Logf("%s: curr_items %s, evictions %s, reclaimed %s, expired_unfetched %s, evicted_unfetched %s, store_no_memory %s",
			who, stats[addr]["curr_items"], stats[addr]["evictions"], stats[addr]["reclaimed"], stats[addr]["expired_unfetched"],
			stats[addr]["evicted_unfetched"], stats[addr]["store_no_memory"])
		switch {
		case num(addr, "evictions") < 1000 || num(addr, "evicted_unfetched") < 1000:
			t.Errorf("%s: evictions %d, evicted_unfetched %d", who, num(addr, "evictions"), num(addr, "evicted_unfetched"))
		case num(addr, "reclaimed") < 1 || num(addr, "expired_unfetched") < 1:
			t.Errorf("%s: reclaimed %d, expired_unfetched %d", who, num(addr, "reclaimed"), num(addr, "expired_unfetched"))
		case num(addr, "store_no_memory") != 0:
			t.Errorf("%s: %d sets refused", who, num(addr, "store_no_memory"))
		case num(addr, "total_items") != sets+200+1 || num(addr, "curr_items")+num(addr, "evictions")+num(addr, "reclaimed") != sets+200+1:
			t.Errorf("%s: %d items stored, %d now, %d evicted, %d reclaimed", who, num(addr, "total_items"), num(addr, "curr_items"),
				num(addr, "evictions"), num(addr, "reclaimed"))
		}
	}
	// Both hold about as many items: 16 MiB of them.
	if m, p := num(mc, "curr_items"), num(psp, "curr_items"); p < m/2 || p > 2*m {
		t.Errorf("psp holds %d items, memcached %d", p, m)
	}
}
