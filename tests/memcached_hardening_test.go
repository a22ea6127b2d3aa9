package tests

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	json "github.com/goccy/go-json"
)

// appCounters reads the application's counters from psp serve's /status.
func appCounters(t *testing.T, s *server) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + s.admin + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		AppCounters []struct {
			Name  string  `json:"name"`
			Value float64 `json:"value"`
		} `json:"app_counters"`
		Net struct {
			TxPackets float64 `json:"tx_packets"`
		} `json:"net"`
		TCP *struct {
			Closed map[string]float64 `json:"closed"`
		} `json:"tcp"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	m := map[string]float64{"tx_packets": st.Net.TxPackets}
	if st.TCP != nil {
		for reason, n := range st.TCP.Closed {
			m["tcp_closed_"+reason] = n
		}
	}
	for _, c := range st.AppCounters {
		m[c.Name] = c.Value
	}
	return m
}

// metricsText is psp serve's /metrics.
func metricsText(t *testing.T, s *server) string {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+s.admin+"/metrics", nil)
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %v, status %d", err, resp.StatusCode)
	}
	return string(b)
}

// tcpSet stores a value over TCP.
func tcpSet(t *testing.T, addr, key string, size int) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "set %s 0 0 %d\r\n%s\r\n", key, size, strings.Repeat("v", size))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "STORED\r\n" {
		t.Fatalf("set %s: %q, %v", key, line, err)
	}
}

// TestMemcachedUDPAmplificationBounded: psp serve --app memcached with its
// defaults answers no UDP request with more than 100 times its bytes (or
// 16 KiB): the 1,409-byte get of one 1 MB value 698 times, which made
// psp send 526,292 datagrams (736 MB), as memcached, and its relatives
// (gets, gat, gats, distinct large keys, a tiny get of a large value,
// repeated commands). A cut reply ends with memcached's SERVER_ERROR line,
// counted in /status and /metrics.
func TestMemcachedUDPAmplificationBounded(t *testing.T) {
	s, tcp := startMemcachedServer(t)
	tcpSet(t, tcp, "k", 1<<20-100)
	for i := range 20 {
		tcpSet(t, tcp, fmt.Sprintf("m%d", i), 100<<10)
	}
	tcpSet(t, tcp, "small", 100)
	many := func(cmd, key string, n int) string { return cmd + strings.Repeat(" "+key, n) + "\r\n" }
	var distinct strings.Builder
	distinct.WriteString("get")
	for i := range 20 {
		fmt.Fprintf(&distinct, " m%d", i)
	}
	distinct.WriteString("\r\n")
	cuts := 0
	for _, c := range []struct {
		name, body string
		cut        bool
	}{
		{"get of a 1 MB value 698 times", many("get", "k", 698), true},
		{"gets", many("gets", "k", 698), true},
		{"gat", many("gat 0", "k", 698), true},
		{"gats", many("gats 0", "k", 698), true},
		{"tiny get", "get k\r\n", true},
		{"tiny get of 100 kB", "get m0\r\n", true},
		{"tiny get of 100 bytes", "get small\r\n", false},
		{"distinct large keys", distinct.String(), true},
		{"repeated gets", strings.Repeat("get m3\r\n", 1000), true},
		{"stats many times", strings.Repeat("stats\r\n", 2000), false},
		{"multi-get of small values", many("get", "small", 100), false},
	} {
		body := c.body
		req := make([]byte, 8, 8+len(body))
		binary.BigEndian.PutUint16(req[0:], 77)
		binary.BigEndian.PutUint16(req[4:], 1)
		req = append(req, body...)
		limit := max(16384, 100*len(req))
		before := appCounters(t, s)
		u, err := net.Dial("udp", s.listen)
		if err != nil {
			t.Fatal(err)
		}
		_ = u.(*net.UDPConn).SetReadBuffer(8 << 20)
		if _, err := u.Write(req); err != nil {
			t.Fatal(err)
		}
		got, dgs := 0, 0
		var last []byte
		buf := make([]byte, 65536)
		for {
			u.SetReadDeadline(time.Now().Add(400 * time.Millisecond))
			n, err := u.Read(buf)
			if err != nil {
				break
			}
			got += n
			dgs++
			last = append(last[:0], buf[:n]...)
		}
		u.Close()
		after := appCounters(t, s)
		sent := after["tx_packets"] - before["tx_packets"]
		t.Logf("%s: request %d bytes, server sent %.0f datagrams, %d (%d bytes, %.1fx) received", c.name, len(req), sent, dgs, got, float64(got)/float64(len(req)))
		if got > limit || sent > float64(limit/8) {
			t.Errorf("%s: %d bytes received, %.0f datagrams sent for a request of %d bytes: want at most %d bytes", c.name, got, sent, len(req), limit)
		}
		if dgs == 0 {
			t.Errorf("%s: no reply", c.name)
			continue
		}
		if isCut := string(last[8:]) == "SERVER_ERROR reply too large for UDP\r\n"; isCut != c.cut {
			t.Errorf("%s: cut %v, want %v; last datagram %.60q", c.name, isCut, c.cut, last[8:])
		}
		if c.cut {
			cuts++
		}
		if n := after["memcached_udp_replies_cut_total"] - before["memcached_udp_replies_cut_total"]; (n == 1) != c.cut {
			t.Errorf("%s: udp replies cut counter +%.0f", c.name, n)
		}
	}
	if m := metricsText(t, s); !strings.Contains(m, fmt.Sprintf("psp_memcached_udp_replies_cut_total %d\n", cuts)) {
		t.Errorf("/metrics does not count %d cut replies", cuts)
	}
}

// rssMB is a process's resident set, MB.
func rssMB(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb float64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb / 1024
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// flood opens n connections and writes prefix then size bytes of filler on
// each, without a line end; it returns them once the writes are done or
// refused.
func flood(t *testing.T, addr string, n int, prefix string, size int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	var wg sync.WaitGroup
	chunk := bytes.Repeat([]byte("k"), 64<<10)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(c, prefix); err != nil {
				return
			}
			for sent := 0; sent < size; sent += len(chunk) {
				if _, err := c.Write(chunk[:min(len(chunk), size-sent)]); err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return conns
}

// TestMemcachedTCPMemoryBounded: 50 connections sending "get " and 2 MB
// without a line end raised psp's RSS from 87 to 343 MB, not given back
// (memcached: 5 -> 109 -> 6 MB). Now a get line past the max line (64 KiB)
// is answered CLIENT_ERROR line too long and its connection closed, values
// being read share a bounded memory (a set past it is answered memcached's
// out of memory line), idle connections are closed, and connections past
// the cap are refused: the RSS stays within a few MB of where it was,
// during the attack and after.
func TestMemcachedTCPMemoryBounded(t *testing.T) {
	s, tcp := startMemcachedServer(t, "--memcached-idle-timeout", "2s", "--memcached-tcp-memory", "8000000")
	pid := s.cmd.Process.Pid
	tcpSet(t, tcp, "warm", 100<<10) // the store's and the runtime's first growth
	before := rssMB(t, pid)

	// 50 connections: "get " and 2 MB, no line end.
	conns := flood(t, tcp, 50, "get ", 2<<20)
	during := rssMB(t, pid)
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(c)
		if string(b) != "CLIENT_ERROR line too long\r\n" {
			t.Errorf("connection %d: %q, %v; want the line-too-long error, then the connection closed", i, b, err)
			break
		}
	}
	for _, c := range conns {
		c.Close()
	}
	// 50 connections: a set of 1 MB sent but for its last 100 kB.
	sets := flood(t, tcp, 50, "set big 0 0 1000000\r\n", 900_000)
	duringSets := rssMB(t, pid)
	for _, c := range sets {
		c.Close()
	}
	time.Sleep(2 * time.Second)
	after := rssMB(t, pid)
	t.Logf("RSS before %.0f MB, during 50 long get lines %.0f MB, during 50 partial 1 MB sets %.0f MB, after %.0f MB", before, during, duringSets, after)
	if during > before+48 || duringSets > before+48 || after > before+48 {
		t.Errorf("RSS before %.0f MB, during %.0f and %.0f MB, after %.0f MB: want within 48 MB", before, during, duringSets, after)
	}

	// The connections did not stay: the long lines were closed at once,
	// the partial sets by the idle timeout, and so is a silent one.
	silent, err := net.Dial("tcp", tcp)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	start := time.Now()
	silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := silent.Read(make([]byte, 10)); err != io.EOF || time.Since(start) > 5*time.Second {
		t.Errorf("silent connection: %d bytes, %v after %v; want closed by the 2s idle timeout", n, err, time.Since(start))
	}
	// A busy one is not closed by it.
	busy, err := net.Dial("tcp", tcp)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	r := bufio.NewReader(busy)
	for i := range 6 {
		busy.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(busy, "version\r\n")
		if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "VERSION ") {
			t.Fatalf("busy connection, command %d: %q, %v", i, line, err)
		}
		time.Sleep(time.Second / 2)
	}
	m := appCounters(t, s)
	t.Logf("counters: %v", m)
	if m["memcached_tcp_long_lines_total"] < 50 || m["tcp_closed_idle"] < 1 || m["memcached_tcp_memory_refusals_total"] < 1 ||
		m["memcached_tcp_read_memory_bytes"] != 0 {
		t.Errorf("counters %v: want 50 long lines, idle timeouts, memory refusals, no read memory held", m)
	}
}

// TestMemcachedTCPConnectionCap: past --memcached-max-conns a connection is
// answered memcached's "ERROR Too many open connections" and closed; once
// one closes, a new one is served.
func TestMemcachedTCPConnectionCap(t *testing.T) {
	s, tcp := startMemcachedServer(t, "--memcached-max-conns", "5")
	var open []net.Conn
	for range 5 {
		c, err := net.Dial("tcp", tcp)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		open = append(open, c)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "version\r\n")
		if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.HasPrefix(line, "VERSION ") {
			t.Fatalf("connection within the cap: %q, %v", line, err)
		}
	}
	extra, err := net.Dial("tcp", tcp)
	if err != nil {
		t.Fatal(err)
	}
	extra.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(extra)
	extra.Close()
	if string(b) != "ERROR Too many open connections\r\n" {
		t.Errorf("connection past the cap: %q, %v", b, err)
	}
	open[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", tcp)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "version\r\n")
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if strings.HasPrefix(line, "VERSION ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection served after one closed: %q", line)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if m := appCounters(t, s); m["memcached_tcp_connections_refused_total"] < 1 {
		t.Errorf("counters %v: want a refused connection", m)
	}
}
