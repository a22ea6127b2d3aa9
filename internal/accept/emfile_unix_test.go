//go:build unix

package accept

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/persephone-go/psp/internal/testenv"
)

// childLimit is the RLIMIT_NOFILE of the child server of
// TestRealFileLimit: a flood of connections exhausts it.
const childLimit = 64

// TestMain runs the child server when asked to.
func TestMain(m *testing.M) {
	if cap := os.Getenv("ACCEPT_TEST_CHILD_CAP"); cap != "" {
		runChild(cap)
		return
	}
	os.Exit(m.Run())
}

// runChild serves HTTP under a low file limit through a Listener with the
// given cap: GET /counts says the loop's counters and how often the rest
// of the process failed to open a file. It prints its address and serves until its
// stdin closes.
func runChild(capText string) {
	maxConns, _ := strconv.Atoi(capText)
	lim := syscall.Rlimit{Cur: childLimit, Max: childLimit}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Println("setrlimit:", err)
		os.Exit(2)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(2)
	}
	ln := NewListener(raw, NewLoop(Options{Name: "child", Log: os.Stderr, MinPause: time.Millisecond, MaxPause: 50 * time.Millisecond}), maxConns)
	mux := http.NewServeMux()
	// The rest of the process opens a file every few milliseconds, as a
	// server's other parts do.
	var openFailures atomic.Int64
	go func() {
		for {
			if f, err := os.Open(os.DevNull); err != nil {
				openFailures.Add(1)
			} else {
				f.Close()
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	mux.HandleFunc("/counts", func(w http.ResponseWriter, r *http.Request) {
		c := ln.Loop().Counts()
		fmt.Fprintf(w, "%d %d %d %d", c.Exhausted, c.Refused, c.Accepted, openFailures.Load())
	})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	fmt.Println(raw.Addr())
	err = http.Serve(ln, mux)
	fmt.Fprintln(os.Stderr, "serve:", err)
	os.Exit(3)
}

// startChild starts the child server with a cap and returns its address.
func startChild(t *testing.T, maxConns int) string {
	t.Helper()
	line, err := testenv.Child(t, "ACCEPT_TEST_CHILD_CAP="+strconv.Itoa(maxConns)).ReadString('\n')
	if err != nil {
		t.Fatalf("child server: %v", err)
	}
	if _, _, err := net.SplitHostPort(strings.TrimSpace(line)); err != nil {
		t.Fatalf("child server: %s", line)
	}
	return strings.TrimSpace(line)
}

func get(addr, path string) (string, error) {
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// flood opens n connections that send nothing (half-open requests) and
// returns a function closing them.
func flood(t *testing.T, addr string, n int) func() {
	t.Helper()
	var conns []net.Conn
	for range n {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatalf("dial %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	return func() {
		for _, c := range conns {
			c.Close()
		}
	}
}

// counts asks the child for its counters, waiting for it to answer again
// after a flood.
func counts(t *testing.T, addr string) (exhausted, refused, openFailures int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := get(addr, "/counts")
		if err == nil {
			var accepted int
			fmt.Sscan(got, &exhausted, &refused, &accepted, &openFailures)
			t.Logf("exhausted %d, refused %d, accepted %d, failed opens %d", exhausted, refused, accepted, openFailures)
			return exhausted, refused, openFailures
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer after the flood ended: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRealFileLimit floods a server running under a 64-descriptor limit
// with twice as many idle connections. Without a cap, accept fails with
// EMFILE while they are open, the rest of the process cannot open a file,
// and the server serves again once they close; with a cap below the
// limit, accept never runs out, the excess is refused, and the rest of
// the process opens its files.
func TestRealFileLimit(t *testing.T) {
	t.Run("no cap", func(t *testing.T) {
		addr := startChild(t, 0)
		closeAll := flood(t, addr, 2*childLimit)
		time.Sleep(200 * time.Millisecond) // the child accepts until EMFILE
		closeAll()
		exhausted, _, openFailures := counts(t, addr)
		if exhausted == 0 || openFailures == 0 {
			t.Errorf("the flood never ran the process out of descriptors (the test proves nothing)")
		}
	})
	t.Run("cap below the limit", func(t *testing.T) {
		addr := startChild(t, childLimit/2)
		closeAll := flood(t, addr, 2*childLimit)
		time.Sleep(200 * time.Millisecond)
		closeAll()
		exhausted, refused, openFailures := counts(t, addr)
		if exhausted != 0 || refused == 0 || openFailures != 0 {
			t.Errorf("want no exhausted accept, no failed open and some refused connections")
		}
	})
}
