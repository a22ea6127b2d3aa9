package tests

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/app/memcached"
	"github.com/persephone-go/psp/nic/tcp"
)

// TestMemcachedTCPUnderFileLimit: psp serve --app memcached on TCP under a
// small hard RLIMIT_NOFILE (ulimit -Hn 256, the soft one 64), flooded with more connections
// than the limit allows at once, each asking for the version. The startup
// line says the budget, from the hard limit; as many as the budget gives the dataplane are
// answered, every other one is told "ERROR Too many open connections" (or
// reset) at once, none hangs; the admin endpoint answers during the flood;
// and once the flood has gone a new connection is answered. (A memcached
// accept loop that met its first EMFILE had stopped, leaving a socket
// that connected and never answered.)
func TestMemcachedTCPUnderFileLimit(t *testing.T) {
	t.Run("store in memory", func(t *testing.T) { tcpUnderFileLimit(t, "") })
	// On disk, the store keeps fewer files open to leave the
	// connections some of the limit (its default would take all of it).
	t.Run("store on disk", func(t *testing.T) { tcpUnderFileLimit(t, t.TempDir()) })
}

// tcpUnderFileLimit is TestMemcachedTCPUnderFileLimit with the store in
// dir ("": in memory).
func tcpUnderFileLimit(t *testing.T, dir string) {
	const limit, flood = 256, 400
	s := &server{
		t:      t,
		tcp:    fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp")),
		admin:  fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp")),
		log:    &bytes.Buffer{},
		done:   make(chan struct{}),
		listen: "",
	}
	args := []string{"serve", "--app", "memcached", "--listen", "tcp://" + s.tcp, "--admin", s.admin, "--workers", "2"}
	if dir != "" {
		args = append(args, "--memcached-dir", dir)
	}
	// A hard limit of 256 and a soft one of 64: Go's runtime raises the
	// soft one to one below the hard one, which it cannot pass.
	cmd := exec.Command("sh", append([]string{"-c", fmt.Sprintf(`ulimit -Sn 64 && ulimit -Hn %d && exec "$0" "$@"`, limit), pspBinary}, args...)...)
	s.run(t, cmd, strings.Join(args, " "))

	type answer struct {
		line string
		err  error
		conn net.Conn
	}
	answers := make(chan answer, flood)
	var wg sync.WaitGroup
	for range flood {
		wg.Go(func() {
			c, err := net.DialTimeout("tcp", s.tcp, 10*time.Second)
			if err != nil {
				answers <- answer{err: err}
				return
			}
			c.SetDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprint(c, "version\r\n")
			line, err := bufio.NewReader(c).ReadString('\n')
			answers <- answer{line, err, c}
		})
	}
	wg.Wait()
	close(answers)
	if _, err := s.fetchStatus(); err != nil {
		t.Errorf("the admin endpoint during the flood: %v", err)
	}
	var served, refused int
	var conns []net.Conn
	for a := range answers {
		if a.conn != nil {
			conns = append(conns, a.conn)
		}
		switch {
		case strings.HasPrefix(a.line, "VERSION ") || a.line == memcached.BusyLine:
			served++
		case a.line == "ERROR Too many open connections\r\n" || a.err != nil && !isTimeout(a.err):
			refused++
		default:
			t.Errorf("a connection of the flood: %q, %v (a time-out: it hung)", a.line, a.err)
		}
	}
	body, err := s.statusBody()
	var st struct {
		TCP *tcp.ConnStats `json:"tcp"`
	}
	if err != nil || json.Unmarshal(body, &st) != nil || st.TCP == nil {
		t.Fatalf("status without tcp counters: %v %s", err, body)
	}
	for _, c := range conns {
		c.Close()
	}
	// Once the flood has gone, a new connection is answered.
	var after string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", s.tcp, 5*time.Second)
		if err != nil {
			continue
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprint(c, "version\r\n")
		after, _ = bufio.NewReader(c).ReadString('\n')
		c.Close()
		if strings.HasPrefix(after, "VERSION ") {
			break
		}
	}
	if !strings.HasPrefix(after, "VERSION ") {
		t.Errorf("after the flood: %q, want the version", after)
	}
	s.stop()
	log := s.log.String()
	m := regexp.MustCompile(`up to (\d+) TCP connections.*file descriptors (\d+) \(RLIMIT_NOFILE\): (\d+) kept`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("the startup line does not say the descriptor budget:\n%s", log)
	}
	capConns, _ := strconv.Atoi(m[1])
	// Go's runtime raises the soft limit to one below the hard one.
	said, _ := strconv.Atoi(m[2])
	kept, _ := strconv.Atoi(m[3])
	if said < limit-1 || said > limit || capConns < 1 || capConns >= said {
		t.Errorf("startup line: %q: want the soft limit raised to the hard %d (or one below), and a connection cap below it", m[0], limit)
	}
	// The connections get most of what the server does not keep (a store
	// on disk that kept Pebble's default 1,000 files had left them one).
	if capConns < (said-kept)/2 || strings.Contains(log, "warning: ") {
		t.Errorf("startup line: %q: %d connections of the %d descriptors not kept", m[0], capConns, said-kept)
	}
	t.Logf("%d connections under ulimit -n %d: %d answered (cap %d), %d refused; %s kept for the server's own files; %d rejected, %d accept errors",
		flood, limit, served, capConns, refused, m[3], st.TCP.Rejected, st.TCP.AcceptErrors)
	if served < capConns || served+refused != flood {
		t.Errorf("%d answered, %d refused of %d: want the cap's %d answered and the rest refused", served, refused, flood, capConns)
	}
	if st.TCP.AcceptErrors != 0 || strings.Contains(log, "too many open files") {
		t.Errorf("the server ran out of descriptors (%d accept errors):\n%s", st.TCP.AcceptErrors, log)
	}
}
