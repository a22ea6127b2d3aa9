package loadgen

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/persephone-go/psp/internal/sockstat"
	"github.com/persephone-go/psp/wire"
	"golang.org/x/net/ipv4"
)

// TestClientDropsCounted: replies the kernel drops at the client's own
// socket are counted there, so a loss outside the server is told from
// one inside it. A server answers every request only after it has sent
// the client a burst of junk datagrams, in batches from two goroutines at
// once, more than the client's socket holds while it reads; every datagram it
// sent is then read by the client (an answer, a duplicate or a bad
// reply) or dropped at its socket, but for what the kernel dropped before
// any socket (its input backlog, counted machine-wide).
func TestClientDropsCounted(t *testing.T) {
	const junk, senders = 60000, 2
	for attempt := 1; ; attempt++ {
		conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		w := highBimodal(t)
		sched, err := NewSchedule(w, 1000, 50*time.Millisecond, 1)
		if err != nil {
			t.Fatal(err)
		}
		n := len(sched.Requests)
		var sent atomic.Int64
		served := make(chan struct{})
		go func() {
			defer close(served)
			buf := make([]byte, 2048)
			var replies [][]byte
			var peer *net.UDPAddr
			for len(replies) < n {
				conn.SetReadDeadline(time.Now().Add(10 * time.Second))
				k, from, err := conn.ReadFromUDP(buf)
				if err != nil {
					return
				}
				h, err := wire.Decode(buf[:k])
				if err != nil {
					continue
				}
				reply := make([]byte, wire.HeaderLen)
				h.Encode(reply)
				replies, peer = append(replies, reply), from
			}
			// sendmmsg(2), a batch a call: faster than the client
			// reads one datagram a call.
			pc := ipv4.NewPacketConn(conn)
			var wg sync.WaitGroup
			for range senders {
				wg.Go(func() {
					batch := make([]ipv4.Message, 1024)
					for i := range batch {
						batch[i] = ipv4.Message{Buffers: [][]byte{[]byte("junk")}, Addr: peer}
					}
					for left := junk / senders; left > 0; {
						k, err := pc.WriteBatch(batch[:min(left, len(batch))], 0)
						if err != nil {
							return
						}
						sent.Add(int64(k))
						left -= k
					}
				})
			}
			wg.Wait()
			// Time for the client to read what its socket holds: the
			// answers then find room, and the client stops at the last
			// (else it waits out its grace, reading all there is).
			time.Sleep(200 * time.Millisecond)
			for _, r := range replies {
				if _, err := conn.WriteToUDP(r, peer); err == nil {
					sent.Add(1)
				}
			}
		}()
		backlog0, _ := sockstat.BacklogDrops()
		res, err := Run(context.Background(), Spec{Server: conn.LocalAddr().String(), MaxLag: time.Second, Grace: 2 * time.Second}, sched)
		<-served
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		backlog1, _ := sockstat.BacklogDrops()
		backlog := backlog1 - backlog0
		received := res.Answered + res.Late + res.Duplicates + res.BadReplies
		lost := sent.Load() - received
		t.Logf("attempt %d: the server sent %d datagrams, the client read %d, %d dropped at its socket, %d in the kernel's backlog (machine-wide)",
			attempt, sent.Load(), received, res.ClientDrops, backlog)
		if !res.ClientDropsKnown {
			t.Fatal("the client's socket drops unknown")
		}
		if res.ClientDrops > lost || res.ClientDrops < lost-int64(backlog) {
			t.Fatalf("%d datagrams lost, %d counted at the client's socket, %d in the backlog: the count is wrong", lost, res.ClientDrops, backlog)
		}
		if res.ClientDrops > 0 {
			return
		}
		if attempt == 3 {
			t.Fatalf("the client read all of %d datagrams sent at once by %d goroutines, three times: no drop to count", sent.Load(), senders)
		}
	}
}
