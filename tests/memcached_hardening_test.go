package tests

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
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
		{"stats many times", strings.Repeat("stats\r\n", 2000), true},
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
