package loadgen

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/workload"
)

// fakeMemcached answers memcached UDP requests the way memcached frames
// them: a get of n keys with n datagrams (END on the last), a set with
// STORED; it counts what it saw. Every key is a hit with value "x".
type fakeMemcached struct {
	conn                 *net.UDPConn
	mu                   sync.Mutex
	gets, mgets, sets    int
	malformed            int
	mgetKeys, valueSizes map[int]int
}

func startFakeMemcached(t *testing.T) *fakeMemcached {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadBuffer(4 << 20)
	f := &fakeMemcached{conn: conn, mgetKeys: map[int]int{}, valueSizes: map[int]int{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		out := make([]byte, 0, 2048)
		for {
			n, peer, err := conn.ReadFromUDP(buf)
			if err != nil {
				return
			}
			p := buf[:n]
			if n < 9 || binary.BigEndian.Uint16(p[4:]) != 1 {
				f.count(func() { f.malformed++ })
				continue
			}
			id := binary.BigEndian.Uint16(p)
			line, rest, _ := bytes.Cut(p[8:], []byte("\r\n"))
			words := strings.Fields(string(line))
			dgram := func(body string) {
				out = out[:8]
				binary.BigEndian.PutUint16(out[0:], id)
				binary.BigEndian.PutUint16(out[2:], 0)
				binary.BigEndian.PutUint16(out[4:], 1)
				binary.BigEndian.PutUint16(out[6:], 0)
				out = append(out, body...)
				conn.WriteToUDP(out, peer)
			}
			switch {
			case len(words) == 2 && words[0] == "get":
				f.count(func() { f.gets++ })
				dgram("VALUE " + words[1] + " 0 1\r\nx\r\nEND\r\n")
			case len(words) > 2 && words[0] == "get":
				f.count(func() { f.mgets++; f.mgetKeys[len(words)-1]++ })
				for i, k := range words[1:] {
					end := ""
					if i == len(words)-2 {
						end = "END\r\n"
					}
					dgram("VALUE " + k + " 0 1\r\nx\r\n" + end)
				}
			case len(words) == 5 && words[0] == "set":
				var size int
				fmt.Sscan(words[4], &size)
				if len(rest) != size+2 || !bytes.HasSuffix(rest, []byte("\r\n")) {
					f.count(func() { f.malformed++ })
					dgram("CLIENT_ERROR bad data chunk\r\n")
					continue
				}
				f.count(func() { f.sets++; f.valueSizes[size]++ })
				dgram("STORED\r\n")
			default:
				f.count(func() { f.malformed++ })
				dgram("ERROR\r\n")
			}
		}
	}()
	t.Cleanup(func() { conn.Close(); <-done })
	return f
}

func (f *fakeMemcached) count(fn func()) {
	f.mu.Lock()
	fn()
	f.mu.Unlock()
}

func memcachedWorkload(t testing.TB) *workload.Workload {
	w, err := workload.Builtin("memcached")
	if err != nil {
		t.Fatal(err)
	}
	return &w
}

// TestMemcachedFormat plays the memcached workload against a stand-in:
// every request is well formed, every reply (one datagram per key for
// multi-gets) is matched, nothing is lost.
func TestMemcachedFormat(t *testing.T) {
	f := startFakeMemcached(t)
	sched, err := NewSchedule(memcachedWorkload(t), 4000, 500*time.Millisecond, 3)
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Server: f.conn.LocalAddr().String(), Format: FormatMemcached, MultiGetKeys: 20, ValueSize: 100, MaxLag: time.Second}
	res, err := Run(context.Background(), spec, sched)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(sched.Requests))
	if res.Answered != n || res.Lost != 0 || res.BadReplies != 0 || res.Duplicates != 0 || res.ErrorReplies != 0 {
		t.Errorf("answered %d of %d, lost %d, bad %d, duplicates %d, errors %d", res.Answered, n, res.Lost, res.BadReplies, res.Duplicates, res.ErrorReplies)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.malformed != 0 || int64(f.gets+f.mgets+f.sets) != n {
		t.Errorf("stand-in saw %d gets, %d multi-gets, %d sets, %d malformed; %d sent", f.gets, f.mgets, f.sets, f.malformed, n)
	}
	if f.mgetKeys[20] != f.mgets || f.valueSizes[100] != f.sets || f.mgets == 0 || f.sets == 0 {
		t.Errorf("multi-gets by key count %v, sets by value size %v", f.mgetKeys, f.valueSizes)
	}
	// Only GET, MULTIGET and SET are playable.
	if _, err := Run(context.Background(), Spec{Format: FormatMemcached}, mustSchedule(t, highBimodal(t))); err == nil {
		t.Error("the memcached format accepted SHORT and LONG types")
	}
}

// TestMemcachedRequestIDsWrap: request ids are 16 bits; a run of more than
// 65536 requests still matches every reply to its own request.
func TestMemcachedRequestIDsWrap(t *testing.T) {
	if testing.Short() {
		t.Skip("70,000 requests")
	}
	f := startFakeMemcached(t)
	w := &workload.Workload{Name: "gets", Types: []workload.TypeSpec{{Name: "GET", ID: 1, Share: 1, Service: workload.Dist{Kind: workload.Fixed, Value: workload.Duration(time.Microsecond)}}}}
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	// A modest rate for longer: a loaded machine that stalls the
	// stand-in loses datagrams, not the run.
	sched, err := NewSchedule(w, 24000, 3*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Spec{Server: f.conn.LocalAddr().String(), Format: FormatMemcached, MaxLag: 5 * time.Second, FromActualSend: true}, sched)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(sched.Requests))
	if n <= 65536 {
		t.Fatalf("only %d requests", n)
	}
	// Datagrams may be lost on a loaded machine (the stand-in is slow
	// under the race detector); none may be mismatched, and requests past
	// the wrap are answered.
	late := 0
	for _, at := range res.recv[65536:] {
		if at != 0 {
			late++
		}
	}
	if res.BadReplies != 0 || res.Duplicates != 0 || res.Answered < n/2 || late == 0 {
		t.Errorf("answered %d of %d (%d after the id wrap), bad %d, duplicates %d", res.Answered, n, late, res.BadReplies, res.Duplicates)
	}
}

// TestPreloadMemcached stores every key through a stand-in.
func TestPreloadMemcached(t *testing.T) {
	f := startFakeMemcached(t)
	if err := PreloadMemcached(context.Background(), f.conn.LocalAddr().String(), 500, 32); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sets < 500 || f.valueSizes[32] != f.sets || f.malformed != 0 {
		t.Errorf("%d sets (%v), %d malformed", f.sets, f.valueSizes, f.malformed)
	}
	// Nobody listening: a clear error, not a hang.
	dead, _ := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	addr := dead.LocalAddr().String()
	dead.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := PreloadMemcached(ctx, addr, 10, 8); err == nil {
		t.Error("preload to a closed port succeeded")
	}
}

// TestPreloadMemcachedGivesUpOnSilence: a server that never answers (a
// socket nobody reads) fails the preload after a few windows of sets, not
// after every key of a large key space, and without holding the key
// space in memory; a key space beyond MaxMemcachedKeys is refused at once.
func TestPreloadMemcachedGivesUpOnSilence(t *testing.T) {
	silent, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	err = PreloadMemcached(ctx, silent.LocalAddr().String(), MaxMemcachedKeys, 8)
	if err == nil || !strings.Contains(err.Error(), "no reply") {
		t.Fatalf("preload to a silent server: %v, want an error saying there was no reply", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("gave up after %v", took)
	}
	if err := PreloadMemcached(ctx, silent.LocalAddr().String(), MaxMemcachedKeys+1, 8); !errors.Is(err, ErrBadSpec) {
		t.Errorf("%d keys: %v, want ErrBadSpec", MaxMemcachedKeys+1, err)
	}
	// A server that answers every set with an error is not silent: the
	// preload keeps resending (here until its context ends).
	refusing, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer refusing.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := refusing.ReadFromUDP(buf)
			if err != nil {
				return
			}
			if n >= 8 {
				_, _ = refusing.WriteToUDP(append(buf[:8:8], "SERVER_ERROR out of memory storing object\r\n"...), from)
			}
		}
	}()
	short, cancelShort := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancelShort()
	err = PreloadMemcached(short, refusing.LocalAddr().String(), 10*64, 8)
	if err == nil || strings.Contains(err.Error(), "no reply") {
		t.Errorf("preload to a server refusing every set: %v, want an error other than no reply", err)
	}
}

// A memcached server that sheds every third request with memcached's out
// of memory line (as psp serve --app memcached does) and answers some
// others with another server error: the shed ones count as Overloaded
// (dropped in the statistics), neither answered nor lost, the others as
// answered error replies.
func TestMemcachedOverloadedReplies(t *testing.T) {
	sched, err := NewSchedule(memcachedWorkload(t), 2000, 150*time.Millisecond, 3)
	if err != nil {
		t.Fatal(err)
	}
	shed, failed := 0, 0
	addr, stop := testenv.UDPServer(t, func(req []byte) []byte {
		id := binary.BigEndian.Uint16(req)
		reply := "END\r\n"
		if bytes.HasPrefix(req[8:], []byte("set ")) {
			reply = "STORED\r\n"
		}
		switch {
		case id%3 == 0:
			reply = "SERVER_ERROR out of memory storing object\r\n"
			shed++
		case id%5 == 1:
			reply = "SERVER_ERROR object too large for cache\r\n"
			failed++
		}
		out := binary.BigEndian.AppendUint16(nil, id)
		out = append(out, 0, 0, 0, 1, 0, 0)
		return append(out, reply...)
	})
	res, err := Run(context.Background(), Spec{Server: addr, Format: FormatMemcached, MaxLag: time.Second, Warmup: -1}, sched)
	stop()
	if err != nil {
		t.Fatal(err)
	}
	if res.Overloaded != int64(shed) || res.ErrorReplies != int64(failed) || res.Answered+res.Overloaded != int64(len(sched.Requests)) || res.Lost != 0 || res.Sustained {
		t.Errorf("overloaded %d (server shed %d), error replies %d (server %d), answered %d, lost %d of %d, sustained %v",
			res.Overloaded, shed, res.ErrorReplies, failed, res.Answered, res.Lost, len(sched.Requests), res.Sustained)
	}
	if res.Overall.Dropped != uint64(shed) || !strings.Contains(res.NotSustainedReason(), "overloaded") {
		t.Errorf("dropped %d in the statistics, reason %q", res.Overall.Dropped, res.NotSustainedReason())
	}
}

// TestMemcachedReplyEnd: how each last datagram of a reply ends its request.
func TestMemcachedReplyEnd(t *testing.T) {
	dgram := func(seq, total uint16, body string) []byte {
		p := make([]byte, 8, 8+len(body))
		binary.BigEndian.PutUint16(p[2:], seq)
		binary.BigEndian.PutUint16(p[4:], total)
		return append(p, body...)
	}
	for _, c := range []struct {
		p    []byte
		want int
	}{
		{dgram(0, 1, "END\r\n"), mcAnswer},
		{dgram(0, 1, "STORED\r\n"), mcAnswer},
		{dgram(0, 1, "VALUE k 0 1\r\nx\r\n"), mcMore},
		{dgram(0, 2, "VALUE k 0 2000\r\n"), mcMore},
		{dgram(0, 0, ""), mcMore},
		{dgram(0, 1, "SERVER_ERROR out of memory storing object\r\n"), mcOverloaded},
		{dgram(0, 1, "SERVER_ERROR out of memory writing get response\r\n"), mcOverloaded},
		{dgram(0, 1, "SERVER_ERROR Out of memory allocating item\r\n"), mcOverloaded},
		{dgram(0, 1, "SERVER_ERROR busy, request shed: try again\r\n"), mcOverloaded},
		{dgram(0, 1, "SERVER_ERROR object too large for cache\r\n"), mcError},
		{dgram(0, 1, "CLIENT_ERROR bad data chunk\r\n"), mcError},
		{dgram(0, 1, "ERROR\r\n"), mcError},
	} {
		if got := memcachedReplyEnd(c.p); got != c.want {
			t.Errorf("%q: %d, want %d", c.p[8:], got, c.want)
		}
	}
}
