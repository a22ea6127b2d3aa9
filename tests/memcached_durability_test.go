package tests

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// durabilityLoad is how long sets run before the server is stopped, and
// durabilityConns how many connections send them, one set at a time each.
const (
	durabilityLoad  = time.Second
	durabilityConns = 4
	// durabilityWindow bounds how long before a kill -9 a write that is
	// lost was answered without --memcached-sync: the store syncs its log
	// every 100 ms while writes come; the rest is a busy host's slack.
	durabilityWindow = time.Second
)

// ack is a set answered STORED: its key, value and when.
type ack struct {
	key, value string
	at         time.Time
}

// TestMemcachedDurability: sets over TCP, each answered STORED noted, then
// psp is killed (SIGKILL) under that load, restarted on the same data
// directory, and every answered key read back: with --memcached-sync none
// is lost, without it only writes answered in the last moments before the
// kill. Then sets, a pause of three log sync intervals and a kill -9, and
// sets and a graceful stop (SIGTERM): none lost in either mode.
func TestMemcachedDurability(t *testing.T) {
	for _, mode := range []struct {
		name  string
		extra []string
	}{{"default", nil}, {"sync", []string{"--memcached-sync"}}} {
		t.Run(mode.name, func(t *testing.T) {
			dir := t.TempDir()
			start := func() *server {
				return startServer(t, serverOptions{app: "memcached", policy: "cfcfs", dilation: -1, tcp: true,
					extra: append([]string{"--workers", "4", "--memcached-dir", dir}, mode.extra...)})
			}
			s := start()
			kill := func() { s.cmd.Process.Kill() }
			acked := setUnderLoad(t, s.tcp, "k", 0, kill)
			killed := time.Now()
			<-s.done
			s = start()
			lost := missing(t, s.tcp, acked)
			oldest := time.Duration(0)
			for _, a := range lost {
				oldest = max(oldest, killed.Sub(a.at))
			}
			t.Logf("%s: kill -9 after %d sets answered STORED (%.0f/s from %d connections): %d lost, answered at most %v before the kill",
				mode.name, len(acked), float64(len(acked))/durabilityLoad.Seconds(), durabilityConns, len(lost), oldest.Round(time.Millisecond))
			for _, a := range lost {
				if mode.extra != nil {
					t.Errorf("with --memcached-sync, %s answered STORED %v before the kill is lost", a.key, killed.Sub(a.at))
				} else if killed.Sub(a.at) > durabilityWindow {
					t.Errorf("%s answered STORED %v before the kill is lost", a.key, killed.Sub(a.at))
				}
			}
			for _, c := range []struct {
				prefix, what string
				quiet        time.Duration
				stop         func()
			}{{"q", "a kill -9 300 ms after the last", 300 * time.Millisecond, kill}, {"g", "a graceful stop", 0, func() { s.stop() }}} {
				acked = setUnderLoad(t, s.tcp, c.prefix, c.quiet, c.stop)
				<-s.done
				s = start()
				if lost := missing(t, s.tcp, acked); len(lost) > 0 {
					t.Errorf("%d of %d sets answered STORED lost across %s, the first %s", len(lost), len(acked), c.what, lost[0].key)
				}
			}
		})
	}
}

// setUnderLoad sends sets of distinct keys (prefix, connection, number)
// from durabilityConns connections for durabilityLoad, calls stop (while
// they go on, or once they stopped quiet ago when quiet > 0), and returns
// those answered STORED.
func setUnderLoad(t *testing.T, addr, prefix string, quiet time.Duration, stop func()) []ack {
	t.Helper()
	var (
		mu    sync.Mutex
		acked []ack
		wg    sync.WaitGroup
		done  = make(chan struct{})
	)
	for c := range durabilityConns {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := bufio.NewReader(conn)
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				key := fmt.Sprintf("%s%d.%d", prefix, c, i)
				value := fmt.Sprintf("%s=%08d", key, i*7919)
				conn.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := fmt.Fprintf(conn, "set %s 0 0 %d\r\n%s\r\n", key, len(value), value); err != nil {
					return
				}
				line, err := r.ReadString('\n')
				if err != nil {
					return // the server stopped
				}
				if line != "STORED\r\n" {
					t.Errorf("set %s: %q", key, line)
					return
				}
				mu.Lock()
				acked = append(acked, ack{key, value, time.Now()})
				mu.Unlock()
			}
		}()
	}
	time.Sleep(durabilityLoad)
	if quiet > 0 {
		close(done)
		wg.Wait()
		time.Sleep(quiet)
		stop()
		return acked
	}
	stop()
	wg.Wait()
	return acked
}

// missing reads every key of acked back and returns those not there with
// their value.
func missing(t *testing.T, addr string, acked []ack) []ack {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	var lost []ack
	for first := 0; first < len(acked); first += 100 {
		batch := acked[first:min(first+100, len(acked))]
		var req strings.Builder
		req.WriteString("get")
		for _, a := range batch {
			req.WriteString(" " + a.key)
		}
		req.WriteString("\r\n")
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write([]byte(req.String())); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			if line == "END\r\n" {
				break
			}
			var key string
			var flags, n int
			if _, err := fmt.Sscanf(line, "VALUE %s %d %d", &key, &flags, &n); err != nil {
				t.Fatalf("get: %q", line)
			}
			value, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("get %s: %v", key, err)
			}
			got[key] = strings.TrimSuffix(value, "\r\n")
		}
		for _, a := range batch {
			if v, ok := got[a.key]; !ok {
				lost = append(lost, a)
			} else if v != a.value {
				t.Errorf("%s: %q after the restart, was set to %q", a.key, v, a.value)
			}
		}
	}
	return lost
}
