package tests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/app/memcached"
	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/loadgen"
	"github.com/persephone-go/psp/nic/tcp"
)

// The bounds of the server under attack (small, so that the attacks reach
// them in seconds).
const (
	attackPartialTimeout = time.Second
	attackIdleTimeout    = 3 * time.Second
	attackMaxConns       = 1000
	attackMaxOutput      = 4 << 20
	attackTCPMemory      = 32 << 20
	attackValueMemory    = 8 << 20 // --memcached-tcp-memory
	// attackBuffers and attackBufSize are psp serve's defaults for the
	// memcached application, given explicitly: the TCP dataplane's pool,
	// with the classifier lanes' quarter on top, is memory the server may
	// touch whatever the attack.
	attackBuffers = 2048
	attackBufSize = 65535
	// attackRSSSlack is what the process may grow past its memory before
	// the attacks besides the TCP memory bound: the runtime's own
	// (goroutine stacks, garbage not yet collected) and a thousand
	// connections' state.
	attackRSSSlack = 48 << 20
	// attackGOGC is the server's GOGC: garbage is collected when it is a
	// fifth of the live heap, so that the RSS follows what the server
	// holds rather than what it has thrown away (with Go's default of 100,
	// garbage may grow as large as the live heap, 160 MB of it packet
	// buffers, before it is collected).
	attackGOGC = "GOGC=20"
)

// attackTailsEnv, when set, makes TestMemcachedTCPUnderAttack hold the GET
// load's p99.9 under each attack to twice its figure without one, and
// fail when a GET is shed; without it the figures are logged only: tests
// running beside it on a shared machine move a p99.9 by more than that.
// Run it alone:
//
//	PSP_ATTACK_TAILS=1 go test -run TestMemcachedTCPUnderAttack -v ./tests
const attackTailsEnv = "PSP_ATTACK_TAILS"

// attackPoolBytes is the TCP dataplane's buffer pool.
const attackPoolBytes = (attackBuffers + attackBuffers/4) * attackBufSize

// The GET load that runs on connections of its own during each attack.
const (
	attackLoadRate  = 2000
	attackLoadTime  = 2 * time.Second
	attackLoadConns = 4
	attackLoadKeys  = 1000
)

// attackBench is psp serve --app memcached over TCP with small bounds, and
// the GET load's p99.9 with no attack.
type attackBench struct {
	s       *server
	addr    string // TCP
	quiet   time.Duration
	baseRSS float64 // MB
	// tails: the GET p99.9 under attack is held to twice quiet
	// (attackTailsEnv).
	tails bool
	// loads counts the GET load's runs (each closes attackLoadConns
	// connections as their peer).
	loads int
}

// TestMemcachedTCPUnderAttack attacks psp serve --app memcached over TCP
// (through the TCP dataplane and DARC) while a GET load runs on four
// connections of its own, one attack per subtest: a connection sending
// 1 GiB without a line end; one pipelining 1,000,000 gets and never
// reading, and nine at once (more than the TCP memory holds); 5,000
// connections at once over --memcached-max-conns; peers that reset
// mid-reply; requests split one byte per write; slowloris connections
// holding half a request. Each bound acts and is counted (psp status, and
// /metrics at the end), the server's RSS stays under its memory before the
// attacks plus its buffer pool, the TCP and value memory bounds and slack
// for the runtime, nothing is held once the attackers are gone (no
// connection left open, no memory held), and the load's GET p99.9 stays
// within 2x of its figure with no attack, measured in the same test
// (measured again, and the attack run again, once when it is not; asserted
// only with PSP_ATTACK_TAILS set, when the test runs alone: see
// attackTailsEnv).
func TestMemcachedTCPUnderAttack(t *testing.T) {
	b := startAttackBench(t)
	t.Run("1GiB-without-a-line-end", b.longLines)
	t.Run("1M-gets-never-read", b.pipelineNeverRead)
	t.Run("9-connections-never-read", b.manyNeverRead)
	t.Run("5000-connections-at-once", b.connectionStorm)
	t.Run("reset-mid-reply", b.resetMidReply)
	t.Run("one-byte-per-write", b.bytePerWrite)
	t.Run("slowloris", b.slowloris)
	t.Run("refused-value-dribbled", b.refusedValueDribbled)
	m := metricsText(t, b.s)
	st := b.tcpStats(t)
	for _, want := range []string{
		fmt.Sprintf("psp_tcp_connections_rejected_total %d\n", st.Rejected),
		fmt.Sprintf("psp_tcp_connections_closed_total{reason=\"partial_timeout\"} %d\n", st.Closed.Partial),
		fmt.Sprintf("psp_tcp_connections_closed_total{reason=\"output_limit\"} %d\n", st.Closed.OutputLimit),
		fmt.Sprintf("psp_tcp_connections_closed_total{reason=\"idle\"} %d\n", st.Closed.Idle),
		fmt.Sprintf("psp_tcp_connections_closed_total{reason=\"protocol\"} %d\n", st.Closed.Protocol),
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics does not say %q", strings.TrimSpace(want))
		}
	}
}

// startAttackBench starts psp serve --app memcached with its defaults but
// the attack bounds, stores the GET load's keys and the values the attacks
// read, and measures the GET load with no attack.
func startAttackBench(t *testing.T) *attackBench {
	t.Helper()
	s := startServer(t, serverOptions{app: "memcached", policy: "darc", dilation: -1, tcp: true, minSamples: 5000, env: []string{attackGOGC},
		extra: []string{"--workers", "auto", "--buffers", strconv.Itoa(attackBuffers), "--buf-size", strconv.Itoa(attackBufSize),
			"--tcp-partial-timeout", attackPartialTimeout.String(), "--tcp-idle-timeout", attackIdleTimeout.String(),
			"--memcached-max-conns", strconv.Itoa(attackMaxConns), "--tcp-max-output", strconv.Itoa(attackMaxOutput),
			"--tcp-memory", strconv.Itoa(attackTCPMemory), "--memcached-tcp-memory", strconv.Itoa(attackValueMemory)}})
	b := &attackBench{s: s, addr: s.tcp, tails: os.Getenv(attackTailsEnv) != ""}
	addr := s.tcp
	if err := loadgen.PreloadMemcached(context.Background(), loadgen.TCPScheme+addr, attackLoadKeys, 100); err != nil {
		t.Fatal(err)
	}
	tcpSet(t, addr, "v4k", 4000)
	tcpSet(t, addr, "big", 256<<10)
	b.getP999(t) // warms the server and the client up
	b.quiet, _ = b.getP999(t)
	b.baseRSS = readRSSMB(s.cmd.Process.Pid)
	t.Logf("no attack: GET p99.9 %v, RSS %.0f MB", b.quiet, b.baseRSS)
	return b
}

// getP999 plays GETs of the preloaded keys over attackLoadConns
// connections at attackLoadRate for attackLoadTime and returns the GET
// p99.9 and the number of GETs shed (answered "overloaded": the server
// was too far behind); every other request must be answered.
func (b *attackBench) getP999(t *testing.T) (time.Duration, int64) {
	t.Helper()
	w := builtin(t, "memcached")
	w.Types = w.Types[:1] // GET
	w.Types[0].Share = 1
	sched, err := loadgen.NewSchedule(w, attackLoadRate, attackLoadTime, uint64(time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	res, err := loadgen.Run(context.Background(), loadgen.Spec{Server: loadgen.TCPScheme + b.addr, Conns: attackLoadConns,
		Format: loadgen.FormatMemcached, MemcachedKeys: attackLoadKeys, ValueSize: 100,
		FromActualSend: true, MaxLag: time.Second, SpinWindow: -1, Grace: 5 * time.Second}, sched)
	if err != nil {
		t.Fatalf("GET load: %v", err)
	}
	b.loads++
	if res.Answered+res.Late+res.Overloaded != res.Sent || res.Lost != 0 || res.ErrorReplies != 0 || res.BadReplies != 0 {
		t.Errorf("GET load: %s, errors %d, bad %d", summary(res), res.ErrorReplies, res.BadReplies)
	}
	return time.Duration(res.Types[0].P999Latency), res.Overloaded
}

// underAttack runs attack (until its context is cancelled, when the GET
// load ends; it may take longer to finish its own checks) beside the GET
// load, and checks the load's p99.9 against the quiet figure (and that
// none of its GETs was shed) and the server's peak RSS against its bound.
// When the p99.9 is over 2x, the quiet figure is measured again and the
// attack run again, once.
func (b *attackBench) underAttack(t *testing.T, attack func(ctx context.Context)) {
	t.Helper()
	pid := b.s.cmd.Process.Pid
	rssBound := b.baseRSS + float64(attackPoolBytes+attackTCPMemory+attackValueMemory+attackRSSSlack)/(1<<20)
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); attack(ctx) }()
		var peak float64
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				peak = max(peak, readRSSMB(pid))
				time.Sleep(20 * time.Millisecond)
			}
		}()
		time.Sleep(100 * time.Millisecond) // the attack under way
		p999, shed := b.getP999(t)
		cancel()
		wg.Wait()
		peak = max(peak, readRSSMB(pid))
		t.Logf("attempt %d: GET p99.9 %v under attack (%v without, %.2fx), %d GETs shed, RSS peak %.0f MB (before %.0f, bound %.0f)",
			attempt, p999, b.quiet, float64(p999)/float64(b.quiet), shed, peak, b.baseRSS, rssBound)
		if peak > rssBound {
			t.Errorf("RSS peaked at %.0f MB, over %.0f MB (%.0f before the attacks, the buffer pool %d MiB, the TCP memory bound %d MiB, the value memory %d MiB, slack %d MiB)",
				peak, rssBound, b.baseRSS, attackPoolBytes>>20, attackTCPMemory>>20, attackValueMemory>>20, attackRSSSlack>>20)
		}
		if (p999 <= 2*b.quiet && shed == 0) || !b.tails {
			return
		}
		if attempt == 2 {
			t.Errorf("GET p99.9 %v under attack, %d GETs shed; without an attack %v", p999, shed, b.quiet)
			return
		}
		b.quiet, _ = b.getP999(t)
		t.Logf("GET p99.9 without an attack, again: %v", b.quiet)
	}
}

// oneAfterAnother opens connections one after the other until ctx is
// done, giving each to attack, and closes it; it stops early when attack
// returns false. It returns the number of connections opened.
func (b *attackBench) oneAfterAnother(ctx context.Context, t *testing.T, attack func(i int, c net.Conn) bool) (conns int) {
	for ; ctx.Err() == nil; conns++ {
		c, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Errorf("dial: %v", err)
			return conns
		}
		ok := attack(conns, c)
		c.Close()
		if !ok {
			return conns + 1
		}
	}
	return conns
}

// settle waits until the server holds no connection and no TCP memory
// (every attacker gone), and fails the test if that does not happen
// within the idle timeout and a few seconds.
func (b *attackBench) settle(t *testing.T) tcp.ConnStats {
	t.Helper()
	deadline := time.Now().Add(attackIdleTimeout + 5*time.Second)
	for {
		st := b.tcpStats(t)
		app := appCounters(t, b.s)
		if st.Current == 0 && st.MemoryUsed == 0 && app["memcached_tcp_read_memory_bytes"] == 0 {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("the attack is over, yet the server holds %d connections, %d bytes of TCP memory, %.0f of value memory",
				st.Current, st.MemoryUsed, app["memcached_tcp_read_memory_bytes"])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tcpStats returns the server's TCP connection counters (psp status).
func (b *attackBench) tcpStats(t *testing.T) tcp.ConnStats {
	t.Helper()
	resp, err := http.Get("http://" + b.s.admin + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		TCP *tcp.ConnStats `json:"tcp"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || st.TCP == nil {
		t.Fatalf("status without tcp counters: %v", err)
	}
	return *st.TCP
}

// longLines: connections send "get " (or a line that is no get) and then
// up to 1 GiB without a line end, one after the other for as long as the
// load runs. Each is answered memcached's CLIENT_ERROR line too long (a
// get, past --memcached-max-line) or closed silently (any other line, past
// memcached's 2,048 bytes), counted, long before its gigabyte is sent.
func (b *attackBench) longLines(t *testing.T) {
	before := b.settle(t)
	beforeApp := appCounters(t, b.s)
	var conns, gets int
	var most int64
	chunk := bytes.Repeat([]byte("k"), 64<<10)
	b.underAttack(t, func(ctx context.Context) {
		conns += b.oneAfterAnother(ctx, t, func(i int, c net.Conn) bool {
			prefix := "get "
			if i%2 == 1 {
				prefix = "set "
			}
			sent := int64(0)
			_, err := io.WriteString(c, prefix)
			for err == nil && sent < 1<<30 {
				c.SetWriteDeadline(time.Now().Add(5 * time.Second))
				var n int
				n, err = c.Write(chunk)
				sent += int64(n)
			}
			most = max(most, sent)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			reply, rerr := io.ReadAll(c)
			if err == nil || isTimeout(err) || isTimeout(rerr) {
				t.Errorf("%q and %d bytes without a line end: write %v, read %v: want the connection closed by the server", prefix, sent, err, rerr)
				return false
			}
			if prefix == "get " {
				gets++
				if len(reply) > 0 && string(reply) != "CLIENT_ERROR line too long\r\n" {
					t.Errorf("a get line too long answered %q", reply)
				}
			} else if len(reply) > 0 {
				t.Errorf("a line too long answered %q, want nothing", reply)
			}
			return true
		})
	})
	after := b.settle(t)
	app := appCounters(t, b.s)
	t.Logf("%d connections (%d gets), the longest sent %d bytes before it was closed", conns, gets, most)
	if most > 64<<20 {
		t.Errorf("a connection sent %d bytes without a line end before it was closed", most)
	}
	if n := app["memcached_tcp_long_lines_total"] - beforeApp["memcached_tcp_long_lines_total"]; int(n) != conns {
		t.Errorf("%d connections with a line too long, %.0f counted (memcached_tcp_long_lines_total)", conns, n)
	}
	if n := after.Closed.Protocol - before.Closed.Protocol; int(n) != conns {
		t.Errorf("%d connections closed for a line too long, %d counted (closed protocol)", conns, n)
	}
}

// pipelineNeverRead: a connection sends a million gets of a 4,000-byte
// value and never reads a reply. psp reads and answers until the replies
// held for it pass --tcp-max-output, then closes it and counts it; the next
// connection does the same, for as long as the load runs.
func (b *attackBench) pipelineNeverRead(t *testing.T) {
	before := b.settle(t)
	var conns int
	var most int64
	gets := bytes.Repeat([]byte("get v4k\r\n"), 1_000_000)
	b.underAttack(t, func(ctx context.Context) {
		conns += b.oneAfterAnother(ctx, t, func(_ int, c net.Conn) bool {
			c.SetWriteDeadline(time.Now().Add(attackIdleTimeout + 5*time.Second))
			n, err := c.Write(gets)
			most = max(most, int64(n))
			if err == nil || isTimeout(err) {
				t.Errorf("a million gets never read: %d bytes written, %v: want the connection closed by the server", n, err)
				return false
			}
			return true
		})
	})
	after := b.settle(t)
	t.Logf("%d connections, the most gets sent before one was closed: %d of 1,000,000; pipeline pauses %d", conns, most/9, after.PipelinePauses-before.PipelinePauses)
	if n := after.Closed.OutputLimit - before.Closed.OutputLimit; int(n) != conns {
		t.Errorf("%d connections that never read, %d closed for their output (output_limit)", conns, n)
	}
}

// manyNeverRead: nine connections at once send a million gets each and
// never read a reply, more than the TCP memory bound holds at
// --tcp-max-output each. Each is closed for its output, counted, and the
// GET load on other connections is served meanwhile.
func (b *attackBench) manyNeverRead(t *testing.T) {
	before := b.settle(t)
	n := attackTCPMemory/attackMaxOutput + 1
	gets := bytes.Repeat([]byte("get v4k\r\n"), 1_000_000)
	var conns atomic.Int64
	b.underAttack(t, func(ctx context.Context) {
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				conns.Add(int64(b.oneAfterAnother(ctx, t, func(_ int, c net.Conn) bool {
					c.SetWriteDeadline(time.Now().Add(attackIdleTimeout + 5*time.Second))
					k, err := c.Write(gets)
					if err == nil || isTimeout(err) {
						t.Errorf("a million gets never read: %d bytes written, %v: want the connection closed by the server", k, err)
						return false
					}
					return true
				})))
			}()
		}
		wg.Wait()
	})
	after := b.settle(t)
	t.Logf("%d connections, %d at a time; memory pauses %d, closed: %+v", conns.Load(), n, after.MemoryPauses-before.MemoryPauses, after.Closed)
	if k := after.Closed.OutputLimit - before.Closed.OutputLimit; int64(k) != conns.Load() {
		t.Errorf("%d connections that never read, %d closed for their output (output_limit)", conns.Load(), k)
	}
}

// connectionStorm opens 5,000 connections at once, each asking for the
// version: at no time are more than --memcached-max-conns open (the GET
// load's included), each admitted one answered (its version, or the busy
// line when the server sheds it); the others are answered memcached's
// "ERROR Too many open connections" and closed, each counted as rejected. (Connections
// served early may be closed by the idle timeout while the storm lasts,
// making room for later ones.)
func (b *attackBench) connectionStorm(t *testing.T) {
	storm := 5000
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < uint64(storm+500) {
		lim.Cur = min(lim.Max, uint64(storm+500))
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
		if lim.Cur < uint64(storm+500) {
			storm = int(lim.Cur) - 500
			t.Logf("file descriptor limit %d: %d connections at once", lim.Cur, storm)
			if storm <= 2*attackMaxConns {
				testenv.Skip(t, "file descriptor limit %d: too low to open twice %d connections", lim.Cur, attackMaxConns)
			}
		}
	}
	before := b.settle(t)
	var served, refused, failed atomic.Int64
	var rounds int
	var most int64
	var elapsed time.Duration
	b.underAttack(t, func(ctx context.Context) {
		time.Sleep(500 * time.Millisecond) // the GET load's connections open
		rounds++
		start := time.Now()
		var wg sync.WaitGroup
		open := make(chan net.Conn, storm)
		for range storm {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.DialTimeout("tcp", b.addr, 15*time.Second)
				if err != nil {
					failed.Add(1)
					t.Errorf("a connection of the storm: %v", err)
					return
				}
				c.SetDeadline(time.Now().Add(15 * time.Second))
				_, err = io.WriteString(c, "version\r\n")
				line, rerr := bufio.NewReader(c).ReadString('\n')
				switch {
				case strings.HasPrefix(line, "VERSION ") || line == memcached.BusyLine: // admitted; a shed version is answered
					served.Add(1)
					open <- c
					return
				case line == "ERROR Too many open connections\r\n" || errors.Is(err, syscall.ECONNRESET) || errors.Is(rerr, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
					refused.Add(1)
				default:
					failed.Add(1)
					t.Errorf("a connection of the storm: %q, write %v, read %v", line, err, rerr)
				}
				c.Close()
			}()
		}
		stormDone := make(chan struct{})
		go func() { wg.Wait(); close(stormDone) }()
		for sampling := true; sampling; {
			select {
			case <-stormDone:
				sampling = false
			case <-time.After(20 * time.Millisecond):
			}
			most = max(most, b.tcpStats(t).Current)
		}
		elapsed = time.Since(start)
		<-ctx.Done()
		close(open)
		for c := range open {
			c.Close()
		}
	})
	after := b.settle(t)
	t.Logf("%d rounds of %d connections at once (the last took %v): %d served, %d refused, %d failed; at most %d open; counted rejected %d",
		rounds, storm, elapsed, served.Load(), refused.Load(), failed.Load(), most, after.Rejected-before.Rejected)
	if most > attackMaxConns || served.Load()+refused.Load() != int64(rounds*storm) {
		t.Errorf("%d connections open at once (at most %d), %d served and %d refused of %d; closed before: %+v, after: %+v",
			most, attackMaxConns, served.Load(), refused.Load(), rounds*storm, before.Closed, after.Closed)
	}
	if n := after.Rejected - before.Rejected; n != uint64(refused.Load()) || refused.Load() < int64(rounds*(storm-2*attackMaxConns)) {
		t.Errorf("%d connections refused, %d counted rejected; want at least %d refused", refused.Load(), n, rounds*(storm-2*attackMaxConns))
	}
}

// resetMidReply: connections pipeline 12 gets of a 256 KiB value, read the
// first 64 KiB of the replies and reset the connection (SO_LINGER 0), one
// after the other for as long as the load runs. Each is closed and
// counted, the replies left are dropped, and no memory stays held.
func (b *attackBench) resetMidReply(t *testing.T) {
	before := b.settle(t)
	loads := b.loads
	var conns int
	gets := bytes.Repeat([]byte("get big\r\n"), 12) // 3 MiB of replies: under --tcp-max-output
	b.underAttack(t, func(ctx context.Context) {
		conns += b.oneAfterAnother(ctx, t, func(_ int, c net.Conn) bool {
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write(gets); err != nil {
				t.Errorf("write: %v", err)
			}
			if _, err := io.ReadFull(c, make([]byte, 64<<10)); err != nil {
				t.Errorf("the first 64 KiB of 12 replies of 256 KiB: %v", err)
			}
			c.(*net.TCPConn).SetLinger(0)
			return true
		})
	})
	after := b.settle(t)
	t.Logf("%d connections reset mid-reply: closed reset %d, peer %d; replies dropped %d, requests dropped %d", conns,
		after.Closed.Reset-before.Closed.Reset, after.Closed.Peer-before.Closed.Peer,
		after.RepliesDropped-before.RepliesDropped, after.RequestsDropped-before.RequestsDropped)
	if want, n := uint64(conns+(b.loads-loads)*attackLoadConns), closedTotal(after)-closedTotal(before); n != want {
		t.Errorf("%d connections reset mid-reply or closed by the GET load, %d counted closed: %+v before, %+v after", want, n, before.Closed, after.Closed)
	}
	if n := after.Closed.Reset - before.Closed.Reset; n < uint64(conns)*9/10 {
		t.Errorf("%d connections reset mid-reply, %d counted closed as reset", conns, n)
	}
}

// bytePerWrite: requests cut into one byte per write (TCP_NODELAY) are
// served as if they came whole, a set with its value and get lines of a
// few kilobytes, on eight connections for as long as the load runs.
func (b *attackBench) bytePerWrite(t *testing.T) {
	b.settle(t)
	var requests atomic.Int64
	b.underAttack(t, func(ctx context.Context) {
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.Dial("tcp", b.addr)
				if err != nil {
					t.Errorf("dial: %v", err)
					return
				}
				defer c.Close()
				c.(*net.TCPConn).SetNoDelay(true)
				r := bufio.NewReader(c)
				key := fmt.Sprintf("split%d", i)
				misses := "get" + strings.Repeat(" nokey", 600) + "\r\n" // 3.6 kB
				for n := 0; ctx.Err() == nil; n++ {
					value := strconv.Itoa(n)
					req := fmt.Sprintf("set %s 0 0 %d\r\n%s\r\nget %s\r\n%s", key, len(value), value, key, misses)
					want := fmt.Sprintf("STORED\r\nVALUE %s 0 %d\r\n%s\r\nEND\r\nEND\r\n", key, len(value), value)
					c.SetDeadline(time.Now().Add(10 * time.Second))
					for j := range len(req) {
						if _, err := c.Write([]byte{req[j]}); err != nil {
							t.Errorf("byte %d of %q: %v", j, req, err)
							return
						}
					}
					got := make([]byte, len(want))
					if _, err := io.ReadFull(r, got); err != nil || string(got) != want {
						t.Errorf("one byte per write: %q, %v; want %q", got, err, want)
						return
					}
					requests.Add(3)
				}
			}()
		}
		wg.Wait()
	})
	t.Logf("%d requests sent one byte per write, all answered", requests.Load())
	if requests.Load() == 0 {
		t.Error("no request sent one byte per write was answered")
	}
}

// slowloris: 100 connections hold half a set's value, 100 half a get
// line, and one sends a byte of a get line every 50 ms (never idle): all
// are closed by --tcp-partial-timeout, counted. 20 connections send most
// of a 1 MB set: the values being read share --memcached-tcp-memory, past
// which a set is refused (SERVER_ERROR out of memory storing object) and
// its data skipped; those held are closed by the partial timeout, those
// refused, silent since, by the idle timeout. 50 connections that send
// nothing are closed by --tcp-idle-timeout, counted, and a connection that
// is busy (one request every 500 ms) is not closed by it.
func (b *attackBench) slowloris(t *testing.T) {
	before := b.settle(t)
	beforeApp := appCounters(t, b.s)
	var partials, larges, silent int
	var lastPartial, lastLarge, lastIdle time.Duration
	b.underAttack(t, func(ctx context.Context) {
		start := time.Now()
		var conns []net.Conn
		dial := func() net.Conn {
			c, err := net.Dial("tcp", b.addr)
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			conns = append(conns, c)
			return c
		}
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		var partial, large, idle []net.Conn
		for i := range 200 {
			c := dial()
			if i < 100 {
				fmt.Fprintf(c, "set slow%d 0 0 1000\r\n%s", i, strings.Repeat("v", 500))
			} else {
				io.WriteString(c, "get k1 k2 k")
			}
			partial = append(partial, c)
		}
		dribbler := dial()
		partial = append(partial, dribbler)
		for i := range 20 {
			c := dial()
			fmt.Fprintf(c, "set huge%d 0 0 1000000\r\n", i)
			c.Write(bytes.Repeat([]byte("v"), 900_000))
			large = append(large, c)
		}
		for range 50 {
			idle = append(idle, dial())
		}
		partials, larges, silent = partials+len(partial), larges+len(large), silent+len(idle)
		busy := dial()
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { // a byte every 50 ms, never a line end
			defer wg.Done()
			io.WriteString(dribbler, "get ")
			for time.Since(start) < attackPartialTimeout+3*time.Second {
				time.Sleep(50 * time.Millisecond)
				if _, err := dribbler.Write([]byte("k")); err != nil {
					return
				}
			}
		}()
		go func() { // a version every 500 ms, past the idle timeout
			defer wg.Done()
			r := bufio.NewReader(busy)
			for time.Since(start) < attackIdleTimeout+time.Second {
				busy.SetDeadline(time.Now().Add(5 * time.Second))
				io.WriteString(busy, "version\r\n")
				if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "VERSION ") {
					t.Errorf("a busy connection, after %v: %q, %v", time.Since(start), line, err)
					return
				}
				time.Sleep(500 * time.Millisecond)
			}
		}()
		closedWithin := func(what string, cs []net.Conn, limit time.Duration) time.Duration {
			var last time.Duration
			for _, c := range cs {
				c.SetReadDeadline(start.Add(limit))
				if _, err := io.Copy(io.Discard, c); isTimeout(err) {
					t.Errorf("%s still open %v after it was opened", what, limit)
					return limit
				}
				last = max(last, time.Since(start))
			}
			return last
		}
		lastPartial = closedWithin("a connection holding a partial request", partial, attackPartialTimeout+2*time.Second)
		lastLarge = closedWithin("a connection holding most of a 1 MB set", large, attackIdleTimeout+2*time.Second)
		lastIdle = closedWithin("a silent connection", idle, attackIdleTimeout+2*time.Second)
		wg.Wait()
	})
	after := b.settle(t)
	app := appCounters(t, b.s)
	refusals := int(app["memcached_tcp_memory_refusals_total"] - beforeApp["memcached_tcp_memory_refusals_total"])
	closedPartial, closedIdle := int(after.Closed.Partial-before.Closed.Partial), int(after.Closed.Idle-before.Closed.Idle)
	t.Logf("%d partial requests closed within %v, %d partial 1 MB sets within %v (%d refused), %d silent connections within %v; counted partial %d, idle %d",
		partials, lastPartial, larges, lastLarge, refusals, silent, lastIdle, closedPartial, closedIdle)
	if refusals == 0 || refusals == larges {
		t.Errorf("%d partial sets of 1 MB over a value memory of %d bytes: %d refused, want some", larges, attackValueMemory, refusals)
	}
	if closedPartial != partials+larges-refusals || closedIdle != silent+refusals {
		t.Errorf("closed for a partial request %d, want %d (%d partial requests, %d sets held); closed idle %d, want %d (%d silent, %d refused sets)",
			closedPartial, partials+larges-refusals, partials, larges-refusals, closedIdle, silent+refusals, silent, refusals)
	}
}

// refusedValueDribbled: a set refused for its size (over the item size
// limit) whose data then arrives a byte every 50 ms, never idle, is a
// partial request too: closed by --tcp-partial-timeout, counted.
func (b *attackBench) refusedValueDribbled(t *testing.T) {
	t.Skip("fails: a connection discarding a refused value is not holding a partial request for the TCP dataplane (its FrameSkip resets the partial timer, and so does the framer's FrameMore on no input while it skips)")
	before := b.settle(t)
	c, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	io.WriteString(c, "set toolarge 0 0 100000000\r\n")
	for time.Since(start) < attackPartialTimeout+2*time.Second {
		if _, err := c.Write([]byte("v")); err != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := io.Copy(io.Discard, c); isTimeout(err) {
		t.Errorf("a refused value still arriving, a byte every 50 ms, kept its connection open %v, past the partial timeout %v", time.Since(start), attackPartialTimeout)
	}
	c.Close()
	after := b.settle(t)
	if n := after.Closed.Partial - before.Closed.Partial; n != 1 {
		t.Errorf("closed for a partial request: %d, want 1", n)
	}
}

// closedTotal is the number of connections closed, for any reason.
func closedTotal(st tcp.ConnStats) uint64 {
	var n uint64
	st.Closed.Each(func(_ string, k uint64) { n += k })
	return n
}

// isTimeout reports whether err is a deadline that passed.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// readRSSMB is a process's resident set in MB (0 when unreadable).
func readRSSMB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}
