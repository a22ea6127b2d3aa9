// Package nictest is the conformance suite every nic.Dataplane must pass:
// bursts are received intact, replies built in place go out on any worker's
// TX queue, buffers return to the pool (no leaks), oversized datagrams are
// truncated and counted, Close unblocks Recv, and the counters agree.
//
// A dataplane package calls Run from its tests with an Opener that creates a
// fresh dataplane plus a client able to send requests to it and read its
// replies:
//
//	func TestConformance(t *testing.T) {
//		nictest.Run(t, func(t *testing.T, workers int) nictest.Target {
//			dp := open(workers) // small pool, e.g. 64 buffers
//			return nictest.Target{DP: dp, Send: ..., Recv: ..., FreeBuffers: ..., BufSize: ...}
//		})
//	}
//
// Run closes every dataplane it opens (Close must be idempotent); the opener
// closes its client with t.Cleanup. The suite runs its subtests one after the
// other: each opens its own dataplane.
package nictest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/persephone-go/psp/nic"
)

// Target is a dataplane under test and a client outside it.
type Target struct {
	// DP is the dataplane, opened with the requested number of workers.
	DP nic.Dataplane
	// Send sends one request datagram from the client to the dataplane.
	Send func(payload []byte) error
	// Recv returns the next reply datagram the client received, or an error
	// when none arrives within timeout.
	Recv func(timeout time.Duration) ([]byte, error)
	// FreeBuffers returns how many pool buffers are free. Open the
	// dataplane with a small pool (tens of buffers) so that the reuse test
	// cycles every buffer several times.
	FreeBuffers func() int
	// BufSize is each buffer's payload room. Set it to 0 only for a
	// dataplane that cannot receive datagrams longer than its buffers; the
	// truncation test is then skipped.
	BufSize int
}

// Opener opens a fresh Target with the given number of workers.
type Opener func(t *testing.T, workers int) Target

// timeout bounds every wait in the suite; passing runs take milliseconds.
const timeout = 5 * time.Second

// echoWorkers is the number of TX queues the burst test echoes from.
const echoWorkers = 3

// Run runs the conformance suite against the dataplanes open creates.
func Run(t *testing.T, open Opener) {
	t.Run("PollEmpty", func(t *testing.T) { testPollEmpty(t, start(t, open, 1)) })
	t.Run("BurstEcho", func(t *testing.T) { testBurstEcho(t, start(t, open, echoWorkers), echoWorkers) })
	t.Run("ReplyInPlace", func(t *testing.T) { testReplyInPlace(t, start(t, open, 1)) })
	t.Run("ReplyAllocator", func(t *testing.T) { testReplyAllocator(t, start(t, open, 1)) })
	t.Run("BufferReuse", func(t *testing.T) { testBufferReuse(t, start(t, open, 2)) })
	t.Run("ConcurrentWorkers", func(t *testing.T) { testConcurrentWorkers(t, start(t, open, echoWorkers), echoWorkers) })
	t.Run("Truncation", func(t *testing.T) { testTruncation(t, start(t, open, 1)) })
	t.Run("CloseUnblocksRecv", func(t *testing.T) { testCloseUnblocksRecv(t, start(t, open, 1)) })
}

func start(t *testing.T, open Opener, workers int) Target {
	t.Helper()
	tg := open(t, workers)
	if tg.DP == nil || tg.Send == nil || tg.Recv == nil || tg.FreeBuffers == nil {
		t.Fatal("nictest: Target needs DP, Send, Recv and FreeBuffers")
	}
	t.Cleanup(func() {
		if err := tg.DP.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return tg
}

// request returns a distinct 16-byte request payload for id.
func request(id uint32) []byte {
	p := make([]byte, 16)
	binary.LittleEndian.PutUint32(p, id)
	binary.LittleEndian.PutUint32(p[4:], 1)
	binary.LittleEndian.PutUint32(p[12:], 0xC0FFEE)
	return p
}

// recvN receives exactly n packets, waiting at most timeout in total.
func recvN(t *testing.T, dp nic.Dataplane, n int) []*nic.Buffer {
	t.Helper()
	got := make([]*nic.Buffer, 0, n)
	bufs := make([]*nic.Buffer, 32)
	deadline := time.Now().Add(timeout)
	for len(got) < n {
		if time.Now().After(deadline) {
			t.Fatalf("received %d of %d packets within %v", len(got), n, timeout)
		}
		k, err := dp.Recv(bufs[:min(len(bufs), n-len(got))], 50*time.Millisecond)
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		got = append(got, bufs[:k]...)
	}
	return got
}

// recvReplies reads n replies from the client.
func recvReplies(t *testing.T, tg Target, n int) [][]byte {
	t.Helper()
	var out [][]byte
	for len(out) < n {
		p, err := tg.Recv(timeout)
		if err != nil {
			t.Fatalf("client received %d of %d replies: %v", len(out), n, err)
		}
		out = append(out, p)
	}
	return out
}

func waitFree(t *testing.T, tg Target, want int) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for tg.FreeBuffers() != want {
		if time.Now().After(deadline) {
			t.Fatalf("free buffers = %d, want %d (leak or double free)", tg.FreeBuffers(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func testPollEmpty(t *testing.T, tg Target) {
	bufs := make([]*nic.Buffer, 8)
	for _, wait := range []time.Duration{0, 20 * time.Millisecond} {
		n, err := tg.DP.Recv(bufs, wait)
		if n != 0 || err != nil {
			t.Fatalf("Recv(wait=%v) with nothing sent = %d, %v; want 0, nil", wait, n, err)
		}
	}
	if n, err := tg.DP.Recv(bufs[:0], time.Second); n != 0 || err != nil {
		t.Fatalf("Recv into no buffers = %d, %v; want 0, nil", n, err)
	}
}

func testBurstEcho(t *testing.T, tg Target, workers int) {
	const n = 24
	dp := tg.DP
	free := tg.FreeBuffers()
	before := dp.Now()
	sent := map[string]bool{}
	for i := range n {
		p := request(uint32(1000 + i))
		sent[string(p)] = true
		if err := tg.Send(p); err != nil {
			t.Fatalf("client send: %v", err)
		}
	}
	bufs := recvN(t, dp, n)
	after := dp.Now()
	seen := map[string]bool{}
	for _, b := range bufs {
		p := string(b.Payload())
		switch {
		case !sent[p]:
			t.Fatalf("received a payload that was not sent: %x", p)
		case seen[p]:
			t.Fatalf("received %x twice", p)
		case b.WireLen != b.Len:
			t.Fatalf("WireLen %d != Len %d for an intact datagram", b.WireLen, b.Len)
		case !b.Peer.IsValid() || b.Peer.Port() == 0:
			t.Fatalf("invalid peer %v", b.Peer)
		case b.DstPort == 0:
			t.Fatal("DstPort is 0")
		case b.RxTime < before || b.RxTime > after:
			t.Fatalf("RxTime %d outside [%d, %d]", b.RxTime, before, after)
		}
		seen[p] = true
	}
	if s := dp.Stats(); s.RxPackets != n {
		t.Fatalf("Stats.RxPackets = %d, want %d", s.RxPackets, n)
	}
	// Echo from every worker's queue, in batches of different sizes.

	for w := 0; w < workers; w++ {
		var batch []*nic.Buffer
		for i := w; i < n; i += workers {
			batch = append(batch, bufs[i])
		}
		sentN, err := dp.TxQueue(w).Send(batch)
		if err != nil || sentN != len(batch) {
			t.Fatalf("worker %d Send(%d) = %d, %v", w, len(batch), sentN, err)
		}
	}
	got := map[string]bool{}
	for _, r := range recvReplies(t, tg, n) {
		if !sent[string(r)] || got[string(r)] {
			t.Fatalf("reply %x is not an echo of a request, or a duplicate", r)
		}
		got[string(r)] = true
	}
	if s := dp.Stats(); s.TxPackets != n || s.TxErrors != 0 {
		t.Fatalf("Stats TxPackets %d TxErrors %d, want %d and 0", s.TxPackets, s.TxErrors, n)
	}
	waitFree(t, tg, free)
}

func testReplyInPlace(t *testing.T, tg Target) {
	dp := tg.DP
	req := request(7)
	if err := tg.Send(req); err != nil {
		t.Fatal(err)
	}
	b := recvN(t, dp, 1)[0]
	// Build a longer response in the same buffer.
	resp := append(bytes.Clone(req), []byte("response")...)
	if len(b.Data) < len(resp) {
		t.Fatalf("buffer room %d too small for a %d-byte response", len(b.Data), len(resp))
	}
	b.Len = copy(b.Data, resp)
	if n, err := dp.TxQueue(0).Send([]*nic.Buffer{b}); n != 1 || err != nil {
		t.Fatalf("Send = %d, %v", n, err)
	}
	got := recvReplies(t, tg, 1)[0]
	if !bytes.Equal(got, resp) {
		t.Fatalf("reply %q, want %q", got, resp)
	}
}

// testReplyAllocator sends a three-datagram reply: two extra buffers from
// AllocReply, then the request's own buffer, in that order, and checks that
// every buffer returns to the pool. Dataplanes without nic.ReplyAllocator
// skip it.
func testReplyAllocator(t *testing.T, tg Target) {
	dp := tg.DP
	alloc, ok := dp.(nic.ReplyAllocator)
	if !ok {
		t.Skipf("%T does not implement nic.ReplyAllocator", dp)
	}
	free := tg.FreeBuffers()
	if err := tg.Send(request(9)); err != nil {
		t.Fatal(err)
	}
	req := recvN(t, dp, 1)[0]
	var out []*nic.Buffer
	for i := range 2 {
		b := alloc.AllocReply(req)
		if b == nil {
			t.Fatal("AllocReply = nil with free buffers")
		}
		if b.Len != 0 || len(b.Data) == 0 || b.Peer != req.Peer || b.DstPort != req.DstPort {
			t.Fatalf("AllocReply: len %d, room %d, peer %v port %d; want 0, >0, %v %d", b.Len, len(b.Data), b.Peer, b.DstPort, req.Peer, req.DstPort)
		}
		b.Len = copy(b.Data, fmt.Sprintf("part %d", i))
		out = append(out, b)
	}
	req.Len = copy(req.Data, "last")
	out = append(out, req)
	if n, err := dp.TxQueue(0).Send(out); n != 3 || err != nil {
		t.Fatalf("Send = %d, %v", n, err)
	}
	got := recvReplies(t, tg, 3)
	for i, want := range []string{"part 0", "part 1", "last"} {
		if string(got[i]) != want {
			t.Errorf("datagram %d = %q, want %q", i, got[i], want)
		}
	}
	waitFree(t, tg, free)
	// A buffer taken but not needed goes back with Release.
	if err := tg.Send(request(10)); err != nil {
		t.Fatal(err)
	}
	req = recvN(t, dp, 1)[0]
	extra := alloc.AllocReply(req)
	if extra == nil {
		t.Fatal("AllocReply = nil with free buffers")
	}
	dp.Release(extra, req)
	waitFree(t, tg, free)
}

func testBufferReuse(t *testing.T, tg Target) {
	dp := tg.DP
	free := tg.FreeBuffers()
	if free <= 0 {
		t.Fatalf("FreeBuffers = %d on a fresh dataplane", free)
	}
	const burst = 16
	total := 0
	var id uint32
	for round := 0; total < 3*free; round++ {
		for range burst {
			id++
			if err := tg.Send(request(id)); err != nil {
				t.Fatal(err)
			}
		}
		bufs := recvN(t, dp, burst)
		total += burst
		// Half released from another goroutine, half transmitted.
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			dp.Release(bufs[:burst/2]...)
		}()
		if n, err := dp.TxQueue(round % 2).Send(bufs[burst/2:]); n != burst/2 || err != nil {
			t.Fatalf("Send = %d, %v", n, err)
		}
		wg.Wait()
		recvReplies(t, tg, burst/2)
	}
	waitFree(t, tg, free)
	s := dp.Stats()
	if s.RxPackets != uint64(total) || s.TxPackets != uint64(total/2) {
		t.Fatalf("Stats Rx %d Tx %d, want %d and %d", s.RxPackets, s.TxPackets, total, total/2)
	}
}

// testConcurrentWorkers has every worker goroutine transmit on its own TX
// queue at the same time while the net worker keeps receiving (run it with
// -race).
func testConcurrentWorkers(t *testing.T, tg Target, workers int) {
	const rounds, burst = 8, 12
	dp := tg.DP
	free := tg.FreeBuffers()
	queues := make([]chan []*nic.Buffer, workers)
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range queues {
		queues[w] = make(chan []*nic.Buffer, rounds)
		wg.Add(1)
		go func() {
			defer wg.Done()
			tx := dp.TxQueue(w)
			for bufs := range queues[w] {
				if n, err := tx.Send(bufs); n != len(bufs) || err != nil {
					errc <- fmt.Errorf("worker %d Send(%d) = %d, %v", w, len(bufs), n, err)
				}
			}
		}()
	}
	var replies [][]byte
	var id uint32
	for round := range rounds {
		for range burst {
			id++
			if err := tg.Send(request(id)); err != nil {
				t.Fatal(err)
			}
		}
		bufs := recvN(t, dp, burst)
		per := burst / workers
		for w := range workers {
			queues[w] <- bufs[w*per : (w+1)*per]
		}
		if round%2 == 1 { // read replies while workers are still sending
			replies = append(replies, recvReplies(t, tg, 2*burst)...)
		}
	}
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range replies {
		if seen[string(r)] {
			t.Fatalf("reply %x received twice", r)
		}
		seen[string(r)] = true
	}
	if len(seen) != rounds*burst {
		t.Fatalf("%d distinct replies, want %d", len(seen), rounds*burst)
	}
	waitFree(t, tg, free)
}

func testTruncation(t *testing.T, tg Target) {
	if tg.BufSize == 0 {
		t.Skip("dataplane cannot receive datagrams longer than its buffers")
	}
	dp := tg.DP
	big := bytes.Repeat([]byte{0x5A}, tg.BufSize+100)
	if err := tg.Send(big); err != nil {
		t.Fatal(err)
	}
	if err := tg.Send(request(1)); err != nil { // the next one is intact
		t.Fatal(err)
	}
	bufs := recvN(t, dp, 2)
	b := bufs[0]
	if b.Len != tg.BufSize || b.WireLen != len(big) {
		t.Fatalf("truncated datagram: Len %d WireLen %d, want %d and %d", b.Len, b.WireLen, tg.BufSize, len(big))
	}
	if !bytes.Equal(b.Payload(), big[:tg.BufSize]) {
		t.Fatal("truncated payload differs from the datagram's prefix")
	}
	if !bytes.Equal(bufs[1].Payload(), request(1)) || bufs[1].WireLen != 16 {
		t.Fatalf("datagram after a truncated one: %x (WireLen %d)", bufs[1].Payload(), bufs[1].WireLen)
	}
	if s := dp.Stats(); s.RxTruncated != 1 || s.RxPackets != 2 {
		t.Fatalf("Stats RxTruncated %d RxPackets %d, want 1 and 2", s.RxTruncated, s.RxPackets)
	}
	dp.Release(bufs...)
}

func testCloseUnblocksRecv(t *testing.T, tg Target) {
	dp := tg.DP
	errc := make(chan error, 1)
	go func() {
		bufs := make([]*nic.Buffer, 8)
		n, err := dp.Recv(bufs, time.Minute)
		if n != 0 {
			err = fmt.Errorf("Recv returned %d packets, none were sent", n)
		}
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond) // let Recv block (it also works if it has not yet)
	if err := dp.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, nic.ErrClosed) {
			t.Fatalf("pending Recv returned %v, want nic.ErrClosed", err)
		}
	case <-time.After(timeout):
		t.Fatalf("Recv still blocked %v after Close", timeout)
	}
	if _, err := dp.Recv(make([]*nic.Buffer, 1), 0); !errors.Is(err, nic.ErrClosed) {
		t.Fatalf("Recv after Close = %v, want nic.ErrClosed", err)
	}
	if err := dp.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
