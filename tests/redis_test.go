package tests

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/persephone-go/psp/app/redis/redistest"
	"github.com/persephone-go/psp/internal/testenv"
	pspserver "github.com/persephone-go/psp/server"
)

// startRedisServer starts psp serve --app redis on a free TCP port and
// returns it and its address.
func startRedisServer(t testing.TB, extra ...string) (*server, string) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp"))
	s := startServer(t, serverOptions{app: "redis", policy: "darc", dilation: -1, listen: "tcp://" + addr,
		extra: append([]string{"--workers", "2"}, extra...)})
	return s, addr
}

// TestRedisClients: clients nobody here wrote run against psp serve --app
// redis: redis-py's script of every command family, redis-cli
// interactively (in a terminal) and with --scan, and redis-benchmark's
// tests without an error.
func TestRedisClients(t *testing.T) {
	_, addr := startRedisServer(t)
	host, port, _ := net.SplitHostPort(addr)

	redistest.RunRedisPy(t, addr)

	for i := range 120 {
		if out, err := runTool(t, "redis-cli", "-h", host, "-p", port, "SET", "scan:"+strconv.Itoa(i), "v"); err != nil || out != "OK\n" {
			t.Fatalf("redis-cli SET: %v %q", err, out)
		}
	}
	out, err := runTool(t, "redis-cli", "-h", host, "-p", port, "--scan", "--pattern", "scan:*")
	if err != nil {
		t.Fatalf("redis-cli --scan: %v\n%s", err, out)
	}
	if keys := strings.Fields(out); len(keys) != 120 {
		t.Errorf("redis-cli --scan listed %d keys, want 120", len(keys))
	}

	// Interactive: redis-cli reads a terminal (a pty from script(1);
	// TERM=dumb keeps its line editor from querying the terminal), asks
	// the server for its commands' help (COMMAND DOCS), and prints
	// replies the way it prints them to a person.
	testenv.RequireTool(t, "script")
	cli := exec.Command("script", "-qfec", "redis-cli -h "+host+" -p "+port, "/dev/null")
	cli.Env = append(cli.Environ(), "TERM=dumb")
	stdin, _ := cli.StdinPipe()
	var term bytes.Buffer
	cli.Stdout, cli.Stderr = &term, &term
	if err := cli.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(stdin, "SET greeting \"hello world\"\nGET greeting\nHELP GET\nLPUSH l a b\nLRANGE l 0 -1\nNOSUCH\n")
	time.Sleep(time.Second)
	fmt.Fprint(stdin, "QUIT\n")
	done := make(chan error, 1)
	go func() { done <- cli.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cli.Process.Kill()
		t.Fatalf("interactive redis-cli did not quit:\n%s", term.String())
	}
	got := strings.ReplaceAll(term.String(), "\r", "")
	for _, want := range []string{
		addr + "> OK", "\"hello world\"", "Get the value of a key",
		"1) \"b\"\n2) \"a\"", "(error) ERR unknown command 'NOSUCH'",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("interactive redis-cli: no %q in\n%s", want, got)
		}
	}

	out, err = runTool(t, "redis-benchmark", "-h", host, "-p", port, "-n", "2000", "-c", "10", "--csv",
		"-t", "ping,set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,lrange,mset")
	if err != nil || strings.Contains(out, "ERR") || strings.Contains(out, "rror") {
		t.Fatalf("redis-benchmark: %v\n%s", err, out)
	}
	if n := strings.Count(out, "\n"); n < 20 {
		t.Errorf("redis-benchmark printed %d lines, want one per test:\n%s", n, out)
	}
}

// TestRedisConformanceThroughServe sends the conformance sequences to
// redis-server and to psp serve --app redis and compares every reply byte
// for byte.
func TestRedisConformanceThroughServe(t *testing.T) {
	real := redistest.StartRedis(t)
	_, addr := startRedisServer(t)
	for _, c := range slices.Concat(redistest.Cases, redistest.TwoClientCases) {
		t.Run(c.Name, func(t *testing.T) { redistest.Compare(t, real, addr, c) })
	}
}

// TestRedisBadInput: what clients (or attackers) send that Redis's
// protocol refuses, each answered with a Redis error (the connection
// closed where redis-server closes it), while other clients are served.
func TestRedisBadInput(t *testing.T) {
	s, addr := startRedisServer(t, "--tcp-max-request", "1MiB", "--tcp-max-output", "1MiB", "--deadline-factor", "0")
	ok, err := redistest.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ok.Close()
	for _, c := range []struct {
		name, in, want string
		closes         bool
	}{
		{"a count of 2147483647 arguments", "*2147483647\r\n", "-ERR Protocol error: invalid multibulk length\r\n", true},
		{"a bulk length of 2147483647", "*1\r\n$2147483647\r\n", "-ERR Protocol error: invalid bulk length\r\n", true},
		{"a 512 MB value", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$536870912\r\n", "-ERR Protocol error: invalid bulk length\r\n", true},
		{"nested arrays", "*1\r\n*1\r\n$4\r\nPING\r\n", "-ERR Protocol error: expected '$', got '*'\r\n", true},
		{"a bulk length that lies", "*2\r\n$4\r\nECHO\r\n$2\r\nabcd\r\nPING\r\n", "$2\r\nab\r\n+PONG\r\n", false},
		{"binary keys and values", "*3\r\n$3\r\nSET\r\n$4\r\nk\r\n\x00\r\n$6\r\nv\r\n\r\n\xff\r\n*2\r\n$3\r\nGET\r\n$4\r\nk\r\n\x00\r\n", "+OK\r\n$6\r\nv\r\n\r\n\xff\r\n", false},
		{"a cursor never issued", "SCAN 9876543210123 COUNT 5\r\n", "*2\r\n", false},
	} {
		c2, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c2.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c2.Write([]byte(c.in)); err != nil {
			t.Fatal(err)
		}
		var got []byte
		if c.closes {
			got, _ = io.ReadAll(c2)
		} else {
			got = make([]byte, len(c.want))
			_, err = io.ReadFull(c2, got)
			if err != nil {
				t.Errorf("%s: %v after %q", c.name, err, got)
			}
		}
		c2.Close()
		if !bytes.HasPrefix(got, []byte(c.want)) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		if r, err := ok.Do("PING"); err != nil || string(r) != "+PONG\r\n" {
			t.Fatalf("after %s, another client: %q %v", c.name, r, err)
		}
	}

	// Clients that ask for KEYS * (a reply of about 13 MB) and never read
	// it are closed once their reply holds more than --tcp-max-output
	// (the kernel's socket buffers take a few MB before that); the others
	// are served meanwhile, and the server's memory stays bounded.
	const keys = 100000
	fillKeys(t, addr, keys, strings.Repeat("k", 120), 16)
	// GETs and one KEYS first (walking every key, matching one), so that
	// DARC knows GET for short and KEYS for long. (No queue deadlines: a
	// GET that waits is served late, not shed, whatever the reservation.)
	get := func() {
		t.Helper()
		if r, err := ok.Do("GET", "fill:7:"+strings.Repeat("k", 120)); err != nil || !bytes.HasPrefix(r, []byte("$16\r\n")) {
			st, _ := s.fetchStatus()
			t.Fatalf("GET: %q %v; drops %+v, phase %s, groups %+v", r, err, st.Drops, st.Phase, st.Groups)
		}
	}
	for range 300 {
		get()
	}
	if r, err := ok.Do("KEYS", "fill:7:*"); err != nil || !bytes.HasPrefix(r, []byte("*1\r\n")) {
		t.Fatalf("KEYS fill:7:*: %.40q %v", r, err)
	}
	for range 300 {
		get()
	}
	before := readRSSMB(s.cmd.Process.Pid)
	var stalled []net.Conn
	for range 8 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.(*net.TCPConn).SetReadBuffer(4096)
		fmt.Fprint(c, "KEYS *\r\n")
		stalled = append(stalled, c)
	}
	deadline := time.Now().Add(30 * time.Second)
	for appCounters(t, s)["tcp_closed_output_limit"] < float64(len(stalled)) {
		if time.Now().After(deadline) {
			t.Fatalf("%.0f of %d connections that do not read their KEYS * reply closed after 30s", appCounters(t, s)["tcp_closed_output_limit"], len(stalled))
		}
		get()
		time.Sleep(100 * time.Millisecond)
	}
	after := readRSSMB(s.cmd.Process.Pid)
	for _, c := range stalled {
		c.Close()
	}
	t.Logf("RSS %.0f MB before 8 unread KEYS * of %d keys, %.0f MB after", before, keys, after)
	if after-before > 200 {
		t.Errorf("RSS grew by %.0f MB for unread replies bounded at 1 MiB each", after-before)
	}
}

// fillKeys sets n keys fill:<i>:<pad> (i from 0 to n-1) with values of
// size bytes, pipelined.
func fillKeys(t *testing.T, addr string, n int, pad string, size int) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	val := strings.Repeat("v", size)
	w := bufio.NewWriter(c)
	r := bufio.NewReader(c)
	var wg sync.WaitGroup
	var bad atomic.Value
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range n / 100 {
			line, err := r.ReadString('\n')
			if err != nil || line != "+OK\r\n" {
				bad.Store(fmt.Sprintf("%q %v", line, err))
				return
			}
		}
	}()
	for i := 0; i < n; i += 100 {
		args := []string{"MSET"}
		for j := i; j < i+100; j++ {
			args = append(args, "fill:"+strconv.Itoa(j)+":"+pad, val)
		}
		w.Write(redistest.Command(args...))
	}
	w.Flush()
	wg.Wait()
	if b := bad.Load(); b != nil {
		t.Fatalf("MSET: %v", b)
	}
}

// TestRedisMaxMemory: with --redis-maxmemory, a flood of SETs past it is
// refused with Redis's OOM error, GETs are served, and the process's
// memory stays within the stated margin (the Go memory limit serve sets:
// maxmemory and a tenth, a request per worker, the buffers and the TCP
// memory bound, 64 MiB).
func TestRedisMaxMemory(t *testing.T) {
	const maxMemory = 64 << 20
	s, addr := startRedisServer(t, "--redis-maxmemory", "64MiB", "--tcp-memory", "32MiB")
	before := readRSSMB(s.cmd.Process.Pid)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	val := strings.Repeat("v", 1000)
	w, r := bufio.NewWriter(c), bufio.NewReader(c)
	const sets = 120000 // 120 MB of values
	go func() {
		for i := range sets {
			w.Write(redistest.Command("SET", "k:"+strconv.Itoa(i), val))
		}
		w.Flush()
	}()
	ok, oom := 0, 0
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	for range sets {
		line, err := r.ReadString('\n')
		switch {
		case err != nil:
			t.Fatalf("after %d OK and %d OOM: %v", ok, oom, err)
		case line == "+OK\r\n":
			ok++
		case line == "-OOM command not allowed when used memory > 'maxmemory'.\r\n":
			oom++
		default:
			t.Fatalf("SET: %q", line)
		}
	}
	after := readRSSMB(s.cmd.Process.Pid)
	t.Logf("%d SETs of 1 KB stored, %d refused; RSS %.0f MB before, %.0f MB after (maxmemory 64 MiB)", ok, oom, before, after)
	if oom == 0 || ok*1000 > maxMemory {
		t.Errorf("%d stored, %d refused: want refusals once 64 MiB are held", ok, oom)
	}
	pc, err := redistest.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if r, err := pc.Do("GET", "k:7"); err != nil || string(r) != "$1000\r\n"+val+"\r\n" {
		t.Errorf("GET past maxmemory: %.40q %v", r, err)
	}
	limitMB := float64(maxMemory+maxMemory/10+2*(4<<20)+pspserver.DefaultBuffers*(16<<10)+32<<20+64<<20) / (1 << 20)
	if after > limitMB {
		t.Errorf("RSS %.0f MB, over the stated bound of %.0f MB", after, limitMB)
	}
}

// TestRedisWasmClassifiers: psp serve --app redis with the example Wasm
// RESP classifiers (C and Rust) in place of the native one: commands are
// served, and typed as the native classifier types them (a SCAN by its
// COUNT, an MGET by its keys).
func TestRedisWasmClassifiers(t *testing.T) {
	for _, path := range []string{"examples/classifiers/c/resp.wasm", "examples/classifiers/rust/resp.wasm"} {
		t.Run(path, func(t *testing.T) {
			addr := fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp"))
			s := startServer(t, serverOptions{app: "redis", policy: "darc", dilation: -1, listen: "tcp://" + addr, classifier: path,
				extra: []string{"--workers", "2"}})
			c, err := redistest.Dial(addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for _, cmd := range [][]string{{"SET", "k", "v"}, {"GET", "k"}, {"GET", "k"}, {"SCAN", "0", "COUNT", "5000"}, {"MGET", "k", "k"}} {
				if r, err := c.Do(cmd...); err != nil || r[0] == '-' {
					t.Fatalf("%v: %q %v", cmd, r, err)
				}
			}
			// The classifier's types are its tenant's, "default/GET"; the
			// status's counts follow the replies by a moment.
			var answered map[string]uint64
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				answered = map[string]uint64{}
				total := uint64(0)
				for _, ty := range s.status().Types {
					answered[strings.TrimPrefix(ty.Name, "default/")] += ty.Answered
					total += ty.Answered
				}
				if total >= 5 || time.Now().After(deadline) {
					break
				}
			}
			for name, want := range map[string]uint64{"SET": 1, "GET": 2, "SCAN_10K": 1, "MGET": 1, "SCAN": 0} {
				if answered[name] != want {
					t.Errorf("type %s answered %d, want %d (types: %v)", name, answered[name], want, answered)
				}
			}
		})
	}
}

// TestRedisKeysOnAMillionKeys: a KEYS * over a million keys runs on one
// worker while GETs of other connections are answered on the other: GETs
// sent after the KEYS are answered before its reply starts, and the
// reply lists every key.
func TestRedisKeysOnAMillionKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("stores a million keys")
	}
	const keys = 1000000
	_, addr := startRedisServer(t)
	fillKeys(t, addr, keys, "", 8)
	get, err := redistest.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer get.Close()
	for range 200 { // DARC's first profile: GETs are short
		if _, err := get.Do("GET", "fill:1:"); err != nil {
			t.Fatal(err)
		}
	}
	kc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	_ = kc.SetDeadline(time.Now().Add(2 * time.Minute))
	var replyStarted atomic.Bool
	done := make(chan error, 1)
	go func() {
		r := bufio.NewReaderSize(kc, 1<<20)
		if _, err := r.Peek(1); err != nil {
			done <- err
			return
		}
		replyStarted.Store(true)
		line, err := r.ReadString('\n')
		if err != nil || line != "*"+strconv.Itoa(keys)+"\r\n" {
			done <- fmt.Errorf("KEYS * reply %q %v", line, err)
			return
		}
		for range keys {
			if _, err := r.ReadString('\n'); err != nil { // $len
				done <- err
				return
			}
			if _, err := r.ReadString('\n'); err != nil { // the key
				done <- err
				return
			}
		}
		done <- nil
	}()
	if _, err := kc.Write([]byte("KEYS *\r\n")); err != nil {
		t.Fatal(err)
	}
	before, worst := 0, time.Duration(0)
	for !replyStarted.Load() {
		start := time.Now()
		r, err := get.Do("GET", "fill:7:")
		if err != nil || string(r) != "$8\r\nvvvvvvvv\r\n" {
			t.Fatalf("GET during KEYS: %q %v", r, err)
		}
		worst = max(worst, time.Since(start))
		if !replyStarted.Load() {
			before++
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d GETs answered while KEYS * over %d keys ran (slowest %v)", before, keys, worst)
	if before < 10 {
		t.Errorf("%d GETs answered while KEYS * ran, want GETs served meanwhile", before)
	}
}

// TestRedisPipelinesKeepTheirOrder: clients pipelining batches of random
// length of writes and reads (INCR of their own counter and of a shared
// one, SET then GET of their own keys) see every command run in their
// order and whole: their own counter's replies count up by one, a GET
// returns the SET before it, and the shared counter's replies over all
// clients are 1..N once each. Sent as inline commands and as multibulk
// requests, whose runs of one command the server batches.
func TestRedisPipelinesKeepTheirOrder(t *testing.T) {
	for _, multibulk := range []bool{false, true} {
		t.Run(map[bool]string{false: "inline", true: "multibulk"}[multibulk], func(t *testing.T) {
			srv, addr := startRedisServer(t, "--in-place", "0") // every command on a worker's thread: two at once
			commands := pipelineInOrder(t, addr, multibulk)
			st := srv.settledStatus()
			if multibulk && st.Received >= uint64(commands) {
				t.Errorf("%d requests for %d multibulk commands: no run of one command batched", st.Received, commands)
			}
			if st.Answered != st.Received || st.Dropped != 0 {
				t.Errorf("received %d, answered %d, dropped %d", st.Received, st.Answered, st.Dropped)
			}
		})
	}
}

// pipelineInOrder runs TestRedisPipelinesKeepTheirOrder's clients and
// returns the number of commands they sent.
func pipelineInOrder(t *testing.T, addr string, multibulk bool) int {
	const clients, commands = 4, 800
	var mu sync.Mutex
	shared := map[int64]bool{}
	var sent atomic.Int64
	var wg sync.WaitGroup
	for k := range clients {
		wg.Go(func() {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(60 * time.Second))
			br := bufio.NewReader(c)
			own, set := int64(0), map[string]string{}
			var want []string // the replies expected, "shared" for the shared counter's
			seed := uint64(k)
			next := func(n uint64) uint64 { seed = seed*6364136223846793005 + 1442695040888963407; return (seed >> 33) % n }
			for done := 0; done < commands; {
				var batch bytes.Buffer
				emit := func(args ...string) {
					if multibulk {
						batch.Write(redistest.Command(args...))
					} else {
						batch.WriteString(strings.Join(args, " ") + "\r\n")
					}
				}
				want = want[:0]
				n := 1 + int(next(64))
				for range n {
					switch next(4) {
					case 0:
						own++
						emit("INCR", fmt.Sprintf("own:%d", k))
						want = append(want, ":"+strconv.FormatInt(own, 10))
					case 1:
						emit("INCR", "shared")
						want = append(want, "shared")
					case 2:
						key, val := fmt.Sprintf("k:%d:%d", k, next(8)), strconv.Itoa(done)
						set[key] = val
						emit("SET", key, val)
						want = append(want, "+OK")
					default:
						key := fmt.Sprintf("k:%d:%d", k, next(8))
						emit("GET", key)
						if v, ok := set[key]; ok {
							want = append(want, "$"+strconv.Itoa(len(v))+"|"+v)
						} else {
							want = append(want, "$-1")
						}
					}
				}
				if _, err := c.Write(batch.Bytes()); err != nil {
					t.Error(err)
					return
				}
				for i, w := range want {
					line, err := br.ReadString('\n')
					if err != nil {
						t.Errorf("client %d: reply %d: %v", k, done+i, err)
						return
					}
					got := strings.TrimSuffix(line, "\r\n")
					if strings.HasPrefix(got, "$") && got != "$-1" {
						v, err := br.ReadString('\n')
						if err != nil {
							t.Errorf("client %d: reply %d: %v", k, done+i, err)
							return
						}
						got += "|" + strings.TrimSuffix(v, "\r\n")
					}
					if w == "shared" {
						v, err := strconv.ParseInt(strings.TrimPrefix(got, ":"), 10, 64)
						mu.Lock()
						dup := shared[v]
						shared[v] = true
						mu.Unlock()
						if err != nil || !strings.HasPrefix(got, ":") || dup {
							t.Errorf("client %d: shared counter reply %q (seen before: %v)", k, got, dup)
							return
						}
						continue
					}
					if got != w {
						t.Errorf("client %d: reply %d is %q, want %q", k, done+i, got, w)
						return
					}
				}
				done += n
				sent.Add(int64(n))
			}
		})
	}
	wg.Wait()
	for v := int64(1); v <= int64(len(shared)); v++ {
		if !shared[v] {
			t.Fatalf("the shared counter's replies skip %d (%d replies)", v, len(shared))
		}
	}
	return int(sent.Load())
}

// TestRedisLongRequestsLongReplies: a request longer than a pooled buffer
// (read into a buffer of its own) whose reply is longer than a pooled
// buffer too is answered whole, in pooled buffers, on a connection that
// stays open: an MGET of 1,000 keys, an ECHO just over a buffer, inline
// and multibulk.
func TestRedisLongRequestsLongReplies(t *testing.T) {
	_, addr := startRedisServer(t)
	c, err := redistest.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mset, mget := []string{"MSET"}, []string{"MGET"}
	var want strings.Builder
	want.WriteString("*1000\r\n")
	for i := range 1000 {
		k, v := fmt.Sprintf("long:%04d", i), fmt.Sprintf("value-%010d", i)
		mset, mget = append(mset, k, v), append(mget, k)
		fmt.Fprintf(&want, "$%d\r\n%s\r\n", len(v), v)
	}
	if got, err := c.Do(mset...); err != nil || string(got) != "+OK\r\n" {
		t.Fatalf("MSET: %q %v", got, err)
	}
	for round := range 2 { // the second on the same connection
		if got, err := c.Do(mget...); err != nil || string(got) != want.String() {
			t.Fatalf("MGET of 1,000 keys, round %d: %d bytes, %v (want %d bytes)", round, len(got), err, want.Len())
		}
	}
	for _, n := range []int{4090, 4096, 9000} {
		arg := strings.Repeat("e", n)
		wantEcho := fmt.Sprintf("$%d\r\n%s\r\n", n, arg)
		if got, err := c.Do("ECHO", arg); err != nil || string(got) != wantEcho {
			t.Fatalf("ECHO of %d bytes: %d bytes, %v", n, len(got), err)
		}
		if err := c.Send([]byte("ECHO " + arg + "\r\n")); err != nil {
			t.Fatal(err)
		}
		if got, err := c.Read(1); err != nil || string(got) != wantEcho {
			t.Fatalf("inline ECHO of %d bytes: %d bytes, %v", n, len(got), err)
		}
	}
}

// TestRedisTransactionKeepsItsOrder: a pipelined transaction of read-only
// commands (which the dataplane otherwise runs two at once) is queued
// and run in its order, over a psp with two workers, while other
// connections write the keys it reads: EXEC's replies are the keys' in
// the order asked, all of one moment.
func TestRedisTransactionKeepsItsOrder(t *testing.T) {
	_, addr := startRedisServer(t, "--in-place", "0")
	const keys = 40
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			br := bufio.NewReader(c)
			for round := 0; !stop.Load(); round++ {
				// Every key holds its own name and the round: MSET sets
				// them all at once.
				args := []string{"MSET"}
				for i := range keys {
					args = append(args, fmt.Sprintf("tx:%d", i), fmt.Sprintf("%d:%d:%d", i, w, round))
				}
				c.Write(redistest.Command(args...))
				if line, err := br.ReadString('\n'); err != nil || line != "+OK\r\n" {
					t.Errorf("MSET: %q %v", line, err)
					return
				}
			}
		})
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	br := bufio.NewReader(c)
	for range 200 {
		var req bytes.Buffer
		req.Write(redistest.Command("MULTI"))
		for i := range keys {
			// Alternate commands, so that no run of one is batched.
			if i%2 == 0 {
				req.Write(redistest.Command("GET", fmt.Sprintf("tx:%d", i)))
			} else {
				req.Write(redistest.Command("GETRANGE", fmt.Sprintf("tx:%d", i), "0", "-1"))
			}
		}
		req.Write(redistest.Command("EXEC"))
		c.Write(req.Bytes())
		for i := range keys + 1 {
			want := "+QUEUED\r\n"
			if i == 0 {
				want = "+OK\r\n"
			}
			if line, err := br.ReadString('\n'); err != nil || line != want {
				t.Fatalf("reply %d: %q %v, want %q", i, line, err, want)
			}
		}
		if line, _ := br.ReadString('\n'); line != fmt.Sprintf("*%d\r\n", keys) {
			t.Fatalf("EXEC: %q", line)
		}
		moment := ""
		for i := range keys {
			head, _ := br.ReadString('\n')
			if head == "$-1\r\n" || head == "$0\r\n" {
				if head == "$0\r\n" {
					br.ReadString('\n')
				}
				continue // not yet set
			}
			val, _ := br.ReadString('\n')
			val = strings.TrimSuffix(val, "\r\n")
			name, rest, _ := strings.Cut(val, ":")
			if name != strconv.Itoa(i) {
				t.Fatalf("EXEC's reply %d is key %s's: %q", i, name, val)
			}
			if moment == "" {
				moment = rest
			} else if rest != moment {
				t.Fatalf("EXEC's replies of two moments: %q then %q", moment, rest)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
}
