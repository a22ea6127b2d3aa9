package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/persephone-go/psp/app/memcached"
)

// TestMemcachedOverloadedReplies floods psp serve --app memcached (14
// workers, a get or a set costing 10 ms emulated, queue deadlines of 20 ms)
// past its capacity: (1) a paced burst of 400 sets and 100 noreply sets
// from a raw client: every set is answered, either STORED or, shed,
// memcached's out of memory line in its own frame, and only the STORED
// ones are in the store afterwards; the noreply sets get nothing; (2) psp
// client --format memcached at three times the capacity counts the shed
// requests as overloaded, as many as the server says it answered so, and
// the server's accounting identity holds.
func TestMemcachedOverloadedReplies(t *testing.T) {
	s := startServer(t, serverOptions{app: "memcached", policy: "cfcfs", dilation: memcachedDilation, tcp: true,
		extra: []string{"--deadline", "GET=20ms", "--deadline", "WRITE=20ms"}})
	before := s.mustFullStatus(t)
	for _, ts := range before.Types {
		if (ts.Name == "GET" || ts.Name == "WRITE") && (ts.DeadlineNs == nil || *ts.DeadlineNs != int64(20*time.Millisecond)) {
			t.Fatalf("type %s: deadline %v, want 20ms", ts.Name, ts.DeadlineNs)
		}
	}

	// (1) 500 sets in 100 ms: 5,000 a second against a capacity of 1,400.
	conn, err := net.Dial("udp", s.listen)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.UDPConn).SetReadBuffer(1 << 20)
	var mu sync.Mutex
	replies := map[uint16][][]byte{}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		buf := make([]byte, 2048)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			if n >= memcached.UDPHeaderLen {
				mu.Lock()
				id := binary.BigEndian.Uint16(buf)
				replies[id] = append(replies[id], bytes.Clone(buf[:n]))
				mu.Unlock()
			}
		}
	}()
	const sets, silent = 400, 100
	var sent uint64
	for i := range sets + silent {
		var d []byte
		if i%5 == 4 {
			d = memcached.AppendRequest(nil, uint16(1000+i/5), fmt.Appendf(nil, "set n%d 0 0 1 noreply\r\nx\r\n", i))
		} else {
			d = memcached.AppendRequest(nil, uint16(i), fmt.Appendf(nil, "set f%d 0 0 1\r\nx\r\n", i))
		}
		if _, err := conn.Write(d); err == nil {
			sent++
		}
		if i%10 == 9 {
			time.Sleep(2 * time.Millisecond)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		got := 0
		for id := range replies {
			if id < 1000 {
				got++
			}
		}
		mu.Unlock()
		if got == sets || time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(300 * time.Millisecond) // stray replies to the noreply sets
	conn.Close()
	<-readerDone
	stored, shed := map[string]bool{}, map[string]bool{}
	for i := range sets + silent {
		if i%5 == 4 {
			if r := replies[uint16(1000+i/5)]; len(r) > 0 {
				t.Errorf("(1) noreply set %d answered %q", i, r)
			}
			continue
		}
		key := fmt.Sprintf("f%d", i)
		r := replies[uint16(i)]
		storedReply := memcached.AppendRequest(nil, uint16(i), []byte("STORED\r\n"))
		overloaded := memcached.AppendRequest(nil, uint16(i), []byte(memcached.OverloadedLine))
		switch {
		case len(r) != 1:
			t.Errorf("(1) set %d: %d replies %q, want one", i, len(r), r)
		case bytes.Equal(r[0], storedReply):
			stored[key] = true
		case bytes.Equal(r[0], overloaded):
			shed[key] = true
		default:
			t.Errorf("(1) set %d: reply %q, want %q or %q", i, r[0], storedReply, overloaded)
		}
	}
	mid := quiet(t, s)
	t.Logf("(1) %d sets: %d stored, %d answered overloaded; server: %d overloaded replies, drops %v",
		sets, len(stored), len(shed), mid.OverloadReplies-before.OverloadReplies, mid.Drops)
	if len(stored) == 0 || len(shed) < sets/4 {
		t.Errorf("(1) %d stored and %d shed of %d sets at 3.5 times the capacity: want some stored and many shed", len(stored), len(shed), sets)
	}
	if n := mid.OverloadReplies - before.OverloadReplies; n != uint64(len(shed)) {
		t.Errorf("(1) the server answered %d requests overloaded, the client received %d", n, len(shed))
	}

	// (2) psp client --format memcached, GETs and SETs at 3 times the
	// capacity for 1.5 s.
	wl := filepath.Join(t.TempDir(), "gets-sets.yaml")
	if err := os.WriteFile(wl, []byte("name: gets-sets\ntypes:\n"+
		"  - {name: GET, id: 1, share: 0.8, service: {kind: fixed, value: 2us}}\n"+
		"  - {name: SET, id: 3, share: 0.2, service: {kind: fixed, value: 2us}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, pspBinary, "client", "--server", s.listen, "--admin", s.admin,
		"--format", "memcached", "--workload", wl, "--memcached-keys", "1000", "--preload=false",
		"--load", "3", "--workers", strconv.Itoa(workers), "--duration", "1500ms", "--grace", "300ms", "--max-lag", "1s").CombinedOutput()
	t.Logf("(2) psp client:\n%s", out)
	client := regexp.MustCompile(`sent (\d+) of \d+ scheduled, answered (\d+) in time, (\d+) late, (\d+) lost, (\d+) answered "overloaded" \(shed\)(?:, (\d+) send errors)?`).FindSubmatch(out)
	server := regexp.MustCompile(`server, during the run: received \d+, answered \d+, dropped \d+ \([^)]*\), (\d+) of them answered "overloaded"`).FindSubmatch(out)
	if client == nil || server == nil {
		t.Fatalf("(2) psp client's report lacks the client's or the server's overloaded count")
	}
	num := func(b []byte) uint64 { v, _ := strconv.ParseUint(string(b), 10, 64); return v }
	clientSent, lost, overloaded, serverOverloaded := num(client[1])-num(client[6]), num(client[4]), num(client[5]), num(server[1])
	// A reply the network lost is lost to the client too.
	if overloaded == 0 || overloaded > serverOverloaded || serverOverloaded > overloaded+lost {
		t.Errorf("(2) the client counted %d overloaded (%d lost), the server answered %d overloaded", overloaded, lost, serverOverloaded)
	}
	if !regexp.MustCompile(`server, since start: received \d+ = answered \d+ \+ dropped \d+ \+ in flight \d+: holds`).Match(out) {
		t.Errorf("(2) psp client does not report the server's identity as holding")
	}
	accounting(t, s, before, sent+clientSent)

	// What was shed stored nothing; what was stored is there (read over
	// TCP, beside the dispatcher).
	tc, err := net.DialTimeout("tcp", s.tcp, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	var get strings.Builder
	get.WriteString("get")
	for i := range sets + silent {
		if i%5 != 4 {
			fmt.Fprintf(&get, " f%d", i)
		}
	}
	get.WriteString("\r\n")
	if _, err := tc.Write([]byte(get.String())); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	sc := bufio.NewScanner(tc)
	for sc.Scan() && sc.Text() != "END" {
		if f := strings.Fields(sc.Text()); len(f) == 4 && f[0] == "VALUE" {
			found[f[1]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("get over TCP: %v", err)
	}
	for key := range shed {
		if found[key] {
			t.Errorf("%s: answered overloaded, yet stored", key)
		}
	}
	for key := range stored {
		if !found[key] {
			t.Errorf("%s: answered STORED, yet not found", key)
		}
	}
}

// quiet waits until s has nothing in flight and returns its status.
func quiet(t *testing.T, s *server) *fullStatus {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := s.mustFullStatus(t)
		if st.InFlight == 0 || time.Now().After(deadline) {
			return st
		}
		time.Sleep(50 * time.Millisecond)
	}
}
