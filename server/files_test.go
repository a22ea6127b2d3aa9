package server

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/nic/tcp"
)

func TestFileBudget(t *testing.T) {
	base := Config{Workers: 4}
	onDisk := base
	onDisk.App.Memcached.Dir = "/somewhere"
	for _, tc := range []struct {
		name  string
		cfg   Config
		limit uint64
	}{
		{"tiny", base, 256},
		{"ulimit 1024", base, 1024},
		{"ulimit 1024, store on disk", onDisk, 1024},
		{"default hard limit", base, 1 << 20},
		{"huge", base, 1 << 40},
	} {
		b := planFiles(tc.cfg, tc.limit)
		t.Logf("%s: %s (streams %d)", tc.name, b, b.streams)
		if b.admin < minAdminConns || b.admin > maxAdminConns {
			t.Errorf("%s: admin cap %d outside [%d, %d]", tc.name, b.admin, minAdminConns, maxAdminConns)
		}
		if b.perSource < minAdminPerSource || b.perSource > b.admin {
			t.Errorf("%s: %d admin connections from one address, want at least %d and at most the cap %d", tc.name, b.perSource, minAdminPerSource, b.admin)
		}
		if b.streams < 0 || b.reserved <= 0 {
			t.Errorf("%s: %+v", tc.name, b)
		}
		if fits := uint64(b.reserved+b.admin+b.streams) <= tc.limit; !fits && b.streams > 0 {
			t.Errorf("%s: %d reserved + %d admin + %d streams exceed the limit %d", tc.name, b.reserved, b.admin, b.streams, tc.limit)
		}
	}
	// A store on disk keeps a quarter of what is left open, within 64
	// and Pebble's default 1,000: under ulimit -n 1024 the connections
	// keep most of the limit.
	for _, tc := range []struct {
		limit      uint64
		store      int
		streamsMin int
	}{{1024, 218, 600}, {4096, 986, 2500}, {1 << 20, maxStoreFiles, 1 << 19}, {256, minStoreFiles, 20}} {
		a, b := planFiles(base, tc.limit), planFiles(onDisk, tc.limit)
		if b.store != tc.store || b.reserved-a.reserved != tc.store || b.streams < tc.streamsMin || !strings.Contains(b.String(), fmt.Sprintf("(%d of them the store's)", tc.store)) {
			t.Errorf("a store on disk under %d: %s (store %d, streams %d), want %d for the store and at least %d connections", tc.limit, b, b.store, b.streams, tc.store, tc.streamsMin)
		}
		if a.store != 0 {
			t.Errorf("a store in memory keeps %d files", a.store)
		}
	}
	if b := planFiles(onDisk, 200); !strings.Contains(b.String(), "warning") {
		t.Errorf("a limit the store nearly fills says no warning: %s", b)
	}
	if got := memcachedConfig(onDisk).MaxOpenFiles; got != openFiles(onDisk).store {
		t.Errorf("the memcached store may open %d files, the budget keeps %d", got, openFiles(onDisk).store)
	}
	if b := planFiles(base, 0); b.admin != 0 || b.streams != 0 {
		t.Errorf("unknown limit: caps %+v, want none", b)
	}
}

// fdChildEnv, when set, makes the test binary a psp server whose
// RLIMIT_NOFILE is its value (see runFDChild).
const fdChildEnv = "PSP_TEST_FD_CHILD_LIMIT"

// runFDChild serves the emulate application over UDP with the admin
// endpoint on, under a low descriptor limit, and prints its startup line
// and addresses; it stops when its standard input closes.
func runFDChild(limit string) error {
	n, err := strconv.ParseUint(limit, 10, 64)
	if err != nil {
		return err
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: n}); err != nil {
		return fmt.Errorf("setrlimit: %w", err)
	}
	pr, pw := io.Pipe()
	srv, err := New(context.Background(), Config{
		Listen: "127.0.0.1:0", Workers: 2, Buffers: 512, Policy: "cfcfs",
		App:   App{Name: AppEmulate, Dilation: 1, SpinTail: -1},
		Admin: Admin{Addr: "127.0.0.1:0"},
	}, Options{Log: pw})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	fmt.Printf("%s %s\n", srv.Addr(), srv.AdminAddr())
	go io.Copy(os.Stdout, pr)
	return srv.Run(ctx)
}

// TestAdminFloodUnderFileLimit floods the admin endpoint of a server
// limited to 512 descriptors with 1,100 connections that send nothing
// (a flood that had made accept fail, under half its limit). The admin listener holds at
// most its share of the descriptors and refuses the rest at once, so
// accept never runs out of descriptors, the dataplane answers throughout,
// and the endpoint answers again once the flood ends.
func TestAdminFloodUnderFileLimit(t *testing.T) {
	const limit = 512
	out := bufio.NewScanner(testenv.Child(t, fdChildEnv+"="+strconv.Itoa(limit)))
	if !out.Scan() {
		t.Fatal("server printed nothing")
	}
	addrs := strings.Fields(out.Text())
	if len(addrs) != 2 {
		t.Fatalf("server: %s", out.Text())
	}
	listen, admin := addrs[0], addrs[1]
	lines := make(chan string, 100)
	go func() {
		for out.Scan() {
			lines <- out.Text()
		}
		close(lines)
	}()
	startup := <-lines
	if want := fmt.Sprintf("file descriptors %d", limit); !strings.Contains(startup, want) {
		t.Errorf("startup line does not say %q: %s", want, startup)
	}

	udp, err := net.Dial("udp", listen)
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	answers := func(id uint32) bool {
		udp.Write(header(id, 1, 1000))
		udp.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := udp.Read(make([]byte, 2048))
		return err == nil
	}
	if !answers(1) {
		t.Fatal("no answer before the flood")
	}

	var flood []net.Conn
	for len(flood) < 1100 {
		c, err := net.DialTimeout("tcp", admin, 2*time.Second)
		if err != nil {
			t.Fatalf("dial %d: %v", len(flood), err)
		}
		flood = append(flood, c)
	}
	if !answers(2) {
		t.Error("the dataplane did not answer during the flood")
	}
	for _, c := range flood {
		c.Close()
	}

	var metrics string
	waitUntil(t, "the admin endpoint after the flood", func() bool {
		resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + admin + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		metrics = string(b)
		return resp.StatusCode == http.StatusOK
	})
	refused := sumMetric(metrics, `psp_accept_refused_total{listener="admin"}`)
	exhausted := sumMetric(metrics, `psp_accept_errors_total{class="exhausted",listener="admin"}`)
	t.Logf("admin: %g connections refused at the cap, %g accepts out of descriptors", refused, exhausted)
	if refused == 0 || exhausted != 0 {
		t.Errorf("want connections refused at the cap and no accept out of descriptors")
	}
	if !answers(3) {
		t.Error("the dataplane did not answer after the flood")
	}
}

// TestAdminAcceptFatalStopsServer: a listening socket that stops working
// (shut down under the server: accept fails with EINVAL) stops Run with an
// error that says so, rather than leaving a dead admin port.
func TestAdminAcceptFatalStopsServer(t *testing.T) {
	cfg := memConfig()
	srv, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(context.Background()) }()
	time.Sleep(50 * time.Millisecond)
	raw, err := srv.adminAccept.Listener.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	raw.Control(func(fd uintptr) { syscall.Shutdown(int(fd), syscall.SHUT_RD) })
	if err := testenv.Await(t, done, 10*time.Second, "Run to end with a dead admin socket"); err == nil || !strings.Contains(err.Error(), "unusable") {
		t.Errorf("Run = %v, want the admin accept's fatal error", err)
	}
}

// TestTCPConnsUnderFileBudget: the TCP dataplane's connection cap never
// exceeds what the descriptor budget leaves the streams, asked for or
// defaulted; a smaller cap asked for stays.
func TestTCPConnsUnderFileBudget(t *testing.T) {
	b := openFiles(Config{Workers: 2})
	if b.limit == 0 {
		t.Skip("RLIMIT_NOFILE unknown here: no budget to fit under")
	}
	ap := netip.MustParseAddrPort("127.0.0.1:0")
	for _, asked := range []int{0, 10, b.streams + 1, 1 << 30} {
		cfg := Config{Workers: 2, TCP: TCP{MaxConns: asked}}
		got := cfg.tcpConfig(ap, nil, nil, io.Discard).MaxConns
		want := max(min(cmp.Or(asked, tcp.DefaultMaxConns), b.streams), 1)
		if got != want || got > max(b.streams, 1) {
			t.Errorf("max_conns %d under %s (streams %d): cap %d, want %d", asked, b, b.streams, got, want)
		}
	}
	mc := Config{Workers: 2, App: App{Name: AppMemcached, Memcached: Memcached{MaxConns: 1 << 30}}}
	if got := mc.tcpConfig(ap, nil, nil, io.Discard).MaxConns; got > max(b.streams, 1) {
		t.Errorf("memcached's max_conns 1<<30: cap %d over the budget's %d", got, b.streams)
	}
}

// TestTCPAcceptFatalStopsServer: the TCP dataplane's listening socket
// stopping under the server (shut down: accept fails with EINVAL) stops
// Run with an error that says so, served alone or joined with UDP on the
// same port, rather than leaving a port that connects and never answers.
func TestTCPAcceptFatalStopsServer(t *testing.T) {
	for _, listen := range []string{"tcp://127.0.0.1:0", "udp://127.0.0.1:0,tcp://127.0.0.1:0"} {
		t.Run(listen, func(t *testing.T) {
			srv := newMemcachedOn(t, listen)
			done := make(chan error, 1)
			go func() { done <- srv.Run(context.Background()) }()
			addr := srv.Addr()
			if i := strings.LastIndex(addr, "tcp://"); i >= 0 {
				addr = addr[i+len("tcp://"):]
			}
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprint(c, "version\r\n")
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if line, err := bufio.NewReader(c).ReadString('\n'); !strings.HasPrefix(line, "VERSION ") {
				t.Fatalf("before: %q %v", line, err)
			}
			fd := listeningFd(t, addr)
			if err := syscall.Shutdown(fd, syscall.SHUT_RD); err != nil {
				t.Fatal(err)
			}
			// The shut-down socket reports readable: the dataplane wakes
			// and meets the error without a new connection.
			err = testenv.Await(t, done, 10*time.Second, "Run to end with a dead TCP listening socket")
			t.Logf("Run: %v", err)
			if err == nil || !strings.Contains(err.Error(), "unusable") || !strings.Contains(err.Error(), "tcp") {
				t.Errorf("Run = %v, want the TCP accept's fatal error", err)
			}
		})
	}
}

// listeningFd returns this process's descriptor listening on TCP addr.
func listeningFd(t *testing.T, addr string) int {
	t.Helper()
	want, err := netip.ParseAddrPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if on, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_ACCEPTCONN); err != nil || on != 1 {
			continue
		}
		sa, err := syscall.Getsockname(fd)
		if in4, ok := sa.(*syscall.SockaddrInet4); err == nil && ok && in4.Port == int(want.Port()) && netip.AddrFrom4(in4.Addr) == want.Addr() {
			return fd
		}
	}
	t.Fatalf("no descriptor listens on %s", addr)
	return -1
}

// TestAdminSharePerAddress: one client address holding its share of the
// admin connections (idle, as an attacker would hold them) has its next
// connection closed at once, while another address, and loopback, are
// still served.
func TestAdminSharePerAddress(t *testing.T) {
	local := nonLoopbackIPv4(t)
	cfg := memConfig()
	cfg.Admin.Addr = "0.0.0.0:0"
	r := startWith(t, cfg, Options{})
	defer r.stop()
	_, port, _ := net.SplitHostPort(r.srv.AdminAddr())
	var conns []net.Conn
	defer func() { // before the server stops: it would wait for them
		for _, c := range conns {
			c.Close()
		}
	}()
	share := r.srv.adminAccept.PerSource()
	if share != r.srv.files.perSource || share < minAdminPerSource {
		t.Fatalf("the admin listener's share per address %d, the budget's %d", share, r.srv.files.perSource)
	}
	dialFrom := func(from string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", net.JoinHostPort(from, port))
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		return c
	}
	served := func(c net.Conn) bool {
		fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: psp\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	var held []net.Conn
	for range share {
		held = append(held, dialFrom(local))
	}
	// Each held connection is accepted before the next dial is judged.
	waitUntil(t, "the held connections accepted", func() bool { return r.srv.adminAccept.Open() >= share })
	if served(dialFrom(local)) {
		t.Errorf("a connection past %s's share of %d was served", local, share)
	}
	if !served(dialFrom("127.0.0.1")) {
		t.Error("loopback was not served beside the held address")
	}
	held[0].Close()
	waitUntil(t, "a place freed", func() bool { return served(dialFrom(local)) })
	if got := r.srv.adminAccept.Loop().Counts().Refused; got == 0 {
		t.Error("no connection counted as refused")
	}
}

// nonLoopbackIPv4 returns an IPv4 address of this host other than
// loopback's.
func nonLoopbackIPv4(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("interface addresses: %v", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("no IPv4 address but loopback's: no second client address to test with")
	return ""
}
