package tests

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/persephone-go/psp/internal/testenv"
	"github.com/redis/go-redis/v9"
)

// TestRedisBlockingCommands: blocking commands block through psp serve
// --app redis as they do in redis-server, the way job queues use them
// (workers in BRPOP or BLMOVE, producers pushing): more clients blocked
// than there are workers, each served one element once it is pushed, the
// server answering everyone else meanwhile; timeouts; a blocked
// connection's pipelined commands waiting behind its blocking one; a
// client that leaves while blocked leaving nothing behind.
func TestRedisBlockingCommands(t *testing.T) {
	_, addr := startRedisServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const consumers = 40 // twenty times the workers
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: consumers + 4, ReadTimeout: 30 * time.Second})
	defer c.Close()
	blocked := func() int {
		info, err := c.Info(ctx, "clients").Result()
		if err != nil {
			t.Fatalf("INFO clients: %v", err)
		}
		var n int
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "blocked_clients:"); ok {
				n, _ = strconv.Atoi(v)
			}
		}
		return n
	}

	got := make(chan string, consumers)
	errc := make(chan error, consumers)
	for i := range consumers {
		go func() {
			var v []string
			var err error
			if i%2 == 0 {
				v, err = c.BLPop(ctx, 0, "jobs").Result()
			} else {
				var z *redis.ZWithKey
				if z, err = c.BZPopMin(ctx, 0, "zjobs").Result(); err == nil {
					v = []string{z.Key, fmt.Sprint(z.Member)}
				}
			}
			if err != nil {
				errc <- err
				return
			}
			got <- v[1]
		}()
	}
	testenv.WaitFor(t, "every consumer blocked", 20*time.Second, func() bool { return blocked() == consumers })
	// The server answers others while its workers' clients are blocked.
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET while clients are blocked: %v", err)
	}
	var want []string
	for i := range consumers / 2 {
		v := strconv.Itoa(i)
		want = append(want, v, "z"+v)
		if err := c.RPush(ctx, "jobs", v).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.ZAdd(ctx, "zjobs", redis.Z{Score: float64(i), Member: "z" + v}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var all []string
	for range consumers {
		select {
		case v := <-got:
			all = append(all, v)
		case err := <-errc:
			t.Fatalf("a blocked consumer: %v", err)
		case <-ctx.Done():
			t.Fatalf("%d of %d consumers served: %v", len(all), consumers, all)
		}
	}
	slices.Sort(all)
	slices.Sort(want)
	if !slices.Equal(all, want) {
		t.Errorf("consumers got %v, want each element once: %v", all, want)
	}
	if n := blocked(); n != 0 {
		t.Errorf("blocked_clients %d after every consumer was served", n)
	}

	// Timeouts: a null after the timeout, not before.
	start := time.Now()
	if v, err := c.BRPop(ctx, 200*time.Millisecond, "none").Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("BRPOP none 0.2: %v %v, want a null", v, err)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("BRPOP with a 0.2 s timeout answered after %v", took)
	}
	if v, err := c.BLMove(ctx, "none", "dst", "LEFT", "RIGHT", 100*time.Millisecond).Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("BLMOVE none dst 0.1: %q %v, want a null", v, err)
	}

	// A blocked connection's pipelined commands wait behind the blocking
	// one, as redis-server reads nothing more from a blocked client.
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := io.WriteString(raw, "BLPOP p 0\r\nPING\r\n"); err != nil {
		t.Fatal(err)
	}
	raw.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	rd := bufio.NewReader(raw)
	if line, err := rd.ReadString('\n'); err == nil {
		t.Fatalf("blocked connection answered %q before anything was pushed", line)
	}
	if err := c.RPush(ctx, "p", "x").Err(); err != nil {
		t.Fatal(err)
	}
	raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	var replies string
	for range 6 { // *2, $1, p, $1, x, +PONG
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("after the push, read %q: %v", replies, err)
		}
		replies += line
	}
	if want := "*2\r\n$1\r\np\r\n$1\r\nx\r\n+PONG\r\n"; replies != want {
		t.Errorf("pipelined BLPOP and PING answered %q, want %q", replies, want)
	}

	// A client that closes its sending half after a blocking command is
	// answered at once (redis-server would close it unanswered), then
	// closed.
	half, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	io.WriteString(half, "BLPOP nothing 0\r\n")
	half.(*net.TCPConn).CloseWrite()
	half.SetReadDeadline(time.Now().Add(10 * time.Second))
	if rest, err := io.ReadAll(half); err != nil || string(rest) != "*-1\r\n" {
		t.Errorf("BLPOP then a half-close: %q %v, want a null array and the end", rest, err)
	}

	// A client that leaves while blocked leaves nothing behind: a push
	// after it goes to the next client, not to the one that left.
	gone, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(gone, "BLPOP left 0\r\n")
	testenv.WaitFor(t, "the leaving client blocked", 10*time.Second, func() bool { return blocked() == 1 })
	gone.Close()
	testenv.WaitFor(t, "the left client unblocked", 10*time.Second, func() bool { return blocked() == 0 })
	if err := c.RPush(ctx, "left", "kept").Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.LRange(ctx, "left", 0, -1).Result(); err != nil || fmt.Sprint(v) != "[kept]" {
		t.Errorf("LRANGE left after its blocked client left: %v %v, want [kept]", v, err)
	}
}

// TestRedisBlockedClientsExactlyOnce: under concurrent load through psp
// serve --app redis, every element pushed reaches exactly one consumer
// through a chain of blocked clients: producers push (plain RPUSH and
// MULTI/EXEC transactions) to q, movers blocked in BLMOVE q q2 hand each
// element on, consumers blocked in BLPOP q2 take it, while another client
// unblocks blocked clients with CLIENT UNBLOCK ... ERROR (the element then
// stays for the next one).
func TestRedisBlockedClientsExactlyOnce(t *testing.T) {
	_, addr := startRedisServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 32, ReadTimeout: 10 * time.Second})
	defer c.Close()
	const producers, per = 4, 600
	const unblocked = "UNBLOCKED client unblocked via CLIENT UNBLOCK"
	var stop atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	got := make(chan string, producers*per)
	loop := func(what string, pop func() (string, error), keep bool) {
		defer wg.Done()
		for !stop.Load() {
			v, err := pop()
			switch {
			case err == nil:
				if keep {
					got <- v
				}
			case errors.Is(err, redis.Nil) || err.Error() == unblocked || stop.Load():
			default:
				errc <- fmt.Errorf("%s: %w", what, err)
				return
			}
		}
	}
	for range 3 {
		wg.Add(2)
		go loop("BLMOVE", func() (string, error) {
			return c.BLMove(ctx, "q", "q2", "LEFT", "RIGHT", time.Second).Result()
		}, false)
		go loop("BLPOP", func() (string, error) {
			v, err := c.BLPop(ctx, time.Second, "q2").Result()
			if err != nil {
				return "", err
			}
			return v[1], nil
		}, true)
	}
	var unblocks atomic.Int64
	base, err := c.ClientID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			for id := base - 8; id < base+40; id++ {
				if n, _ := c.Do(ctx, "CLIENT", "UNBLOCK", id, "ERROR").Int(); n == 1 {
					unblocks.Add(1)
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	var pwg sync.WaitGroup
	for p := range producers {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for i := 0; i < per; i += 3 {
				vals := []any{fmt.Sprint(p, ":", i), fmt.Sprint(p, ":", i+1), fmt.Sprint(p, ":", i+2)}
				var err error
				if p%2 == 0 {
					err = c.RPush(ctx, "q", vals...).Err()
				} else {
					_, err = c.TxPipelined(ctx, func(tx redis.Pipeliner) error {
						for _, v := range vals {
							tx.RPush(ctx, "q", v)
						}
						return nil
					})
				}
				if err != nil {
					errc <- fmt.Errorf("producer %d: %w", p, err)
					return
				}
			}
		}()
	}
	pwg.Wait()
	seen := make(map[string]bool)
	for len(seen) < producers*per {
		select {
		case v := <-got:
			if seen[v] {
				t.Fatalf("%s received twice", v)
			}
			seen[v] = true
		case err := <-errc:
			t.Fatal(err)
		case <-ctx.Done():
			l1, _ := c.LLen(context.Background(), "q").Result()
			l2, _ := c.LLen(context.Background(), "q2").Result()
			t.Fatalf("received %d of %d (q holds %d, q2 %d)", len(seen), producers*per, l1, l2)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d elements, each received once; %d clients unblocked meanwhile", len(seen), unblocks.Load())
}
