package tests

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRedisGoRedis: go-redis, the most used Go client, against psp serve
// --app redis, in RESP3 (its default: its handshake is HELLO 3) and in
// RESP2: every command family through its typed API, pipelines,
// transactions (TxPipeline, and Watch retried from four goroutines), the
// SCAN iterator, its nil and error replies, and a pool of connections
// used from several goroutines at once.
func TestRedisGoRedis(t *testing.T) {
	for _, proto := range []int{3, 2} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) { goRedisAgainst(t, proto) })
	}
}

func goRedisAgainst(t *testing.T, proto int) {
	_, addr := startRedisServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 8, Protocol: proto})
	defer c.Close()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must("PING", c.Ping(ctx).Err())
	// The connection speaks the protocol asked for (CLIENT INFO's resp=,
	// a verbatim string in RESP3).
	if info, err := c.ClientInfo(ctx).Result(); err != nil || info.Resp != proto {
		t.Errorf("CLIENT INFO: %+v %v, want resp=%d", info, err, proto)
	}
	if sc, err := c.ZScore(ctx, "nokey", "m").Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("ZSCORE of no key: %v %v, want redis.Nil", sc, err)
	}

	// Strings and keys.
	must("SET", c.Set(ctx, "s", "v", time.Minute).Err())
	if v, err := c.Get(ctx, "s").Result(); err != nil || v != "v" {
		t.Errorf("GET: %q %v", v, err)
	}
	if _, err := c.Get(ctx, "nokey").Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET of no key: %v, want redis.Nil", err)
	}
	if ttl, err := c.TTL(ctx, "s").Result(); err != nil || ttl <= 0 || ttl > time.Minute {
		t.Errorf("TTL: %v %v", ttl, err)
	}
	if n, err := c.IncrBy(ctx, "n", 5).Result(); err != nil || n != 5 {
		t.Errorf("INCRBY: %d %v", n, err)
	}
	if f, err := c.IncrByFloat(ctx, "n", 0.5).Result(); err != nil || f != 5.5 {
		t.Errorf("INCRBYFLOAT: %v %v", f, err)
	}
	if vs, err := c.MGet(ctx, "s", "nokey").Result(); err != nil || len(vs) != 2 || vs[0] != "v" || vs[1] != nil {
		t.Errorf("MGET: %v %v", vs, err)
	}
	if err := c.LPush(ctx, "s", "x").Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
		t.Errorf("LPUSH on a string: %v, want WRONGTYPE", err)
	}

	// Lists, hashes, sets, sorted sets.
	must("RPUSH", c.RPush(ctx, "l", "a", "b", "c").Err())
	if vs, err := c.LRange(ctx, "l", 0, -1).Result(); err != nil || strings.Join(vs, ",") != "a,b,c" {
		t.Errorf("LRANGE: %v %v", vs, err)
	}
	if v, err := c.LMove(ctx, "l", "l2", "LEFT", "RIGHT").Result(); err != nil || v != "a" {
		t.Errorf("LMOVE: %q %v", v, err)
	}
	must("HSET", c.HSet(ctx, "h", "f1", "1", "f2", "2").Err())
	if m, err := c.HGetAll(ctx, "h").Result(); err != nil || len(m) != 2 || m["f2"] != "2" {
		t.Errorf("HGETALL: %v %v", m, err)
	}
	must("SADD", c.SAdd(ctx, "s1", "a", "b", "c").Err())
	must("SADD", c.SAdd(ctx, "s2", "b", "c", "d").Err())
	if vs, err := c.SInter(ctx, "s1", "s2").Result(); err != nil || len(vs) != 2 {
		t.Errorf("SINTER: %v %v", vs, err)
	}
	must("ZADD", c.ZAdd(ctx, "z", redis.Z{Score: 1, Member: "a"}, redis.Z{Score: 2.5, Member: "b"}).Err())
	if zs, err := c.ZRangeWithScores(ctx, "z", 0, -1).Result(); err != nil || len(zs) != 2 || zs[1].Score != 2.5 {
		t.Errorf("ZRANGE WITHSCORES: %v %v", zs, err)
	}
	if zs, err := c.ZRangeByScore(ctx, "z", &redis.ZRangeBy{Min: "(1", Max: "+inf"}).Result(); err != nil || len(zs) != 1 || zs[0] != "b" {
		t.Errorf("ZRANGEBYSCORE: %v %v", zs, err)
	}

	// A pipeline, and a transaction.
	pipe := c.Pipeline()
	incr := pipe.Incr(ctx, "p")
	pipe.Incr(ctx, "p")
	get := pipe.Get(ctx, "p")
	if _, err := pipe.Exec(ctx); err != nil || incr.Val() != 1 || get.Val() != "2" {
		t.Errorf("pipeline: %v %d %q", err, incr.Val(), get.Val())
	}
	tx := c.TxPipeline()
	a := tx.Incr(ctx, "tx:a")
	tx.Set(ctx, "tx:b", "x", 0)
	b := tx.Incr(ctx, "tx:a")
	if _, err := tx.Exec(ctx); err != nil || a.Val() != 1 || b.Val() != 2 {
		t.Errorf("TxPipeline: %v %d %d", err, a.Val(), b.Val())
	}

	// WATCH: Client.Watch runs its function on a connection watching
	// the keys; a transaction it runs fails with TxFailedErr when
	// another client modified one of them meanwhile.
	must("SET", c.Set(ctx, "w", "1", 0).Err())
	err := c.Watch(ctx, func(tx *redis.Tx) error {
		if err := c.Set(ctx, "w", "2", 0).Err(); err != nil { // another connection of the pool
			return err
		}
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "w", "3", 0)
			return nil
		})
		return err
	}, "w")
	if !errors.Is(err, redis.TxFailedErr) {
		t.Errorf("Watch with the key modified: %v, want TxFailedErr", err)
	}
	if v, err := c.Get(ctx, "w").Result(); err != nil || v != "2" {
		t.Errorf("after a failed transaction: %q %v, want the other client's 2", v, err)
	}
	// Optimistic locking from several goroutines: go-redis's own
	// example, an increment that reads the value, writes it back in a
	// transaction and tries again on TxFailedErr. None is lost.
	var retries atomic.Int64
	var wgw sync.WaitGroup
	for g := range 4 {
		wgw.Go(func() {
			for i := range 100 {
				for try := 0; ; try++ {
					err := c.Watch(ctx, func(tx *redis.Tx) error {
						n, err := tx.Get(ctx, "watched").Int()
						if err != nil && !errors.Is(err, redis.Nil) {
							return err
						}
						_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
							p.Set(ctx, "watched", n+1, 0)
							return nil
						})
						return err
					}, "watched")
					if err == nil {
						break
					}
					if !errors.Is(err, redis.TxFailedErr) || try > 10000 {
						t.Errorf("goroutine %d, increment %d: %v after %d tries", g, i, err, try)
						return
					}
					retries.Add(1)
				}
			}
		})
	}
	wgw.Wait()
	if n, err := c.Get(ctx, "watched").Int(); err != nil || n != 400 {
		t.Errorf("watched counter %d %v, want 400", n, err)
	}
	t.Logf("400 increments through Watch, %d transactions failed and tried again", retries.Load())

	// The SCAN iterator sees every key once.
	for i := range 300 {
		must("SET", c.Set(ctx, fmt.Sprintf("scan:%d", i), i, 0).Err())
	}
	seen := map[string]bool{}
	it := c.Scan(ctx, 0, "scan:*", 50).Iterator()
	for it.Next(ctx) {
		seen[it.Val()] = true
	}
	if err := it.Err(); err != nil || len(seen) != 300 {
		t.Errorf("SCAN iterator: %d keys, %v", len(seen), err)
	}

	// The pool, from several goroutines at once.
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				if err := c.Incr(ctx, "shared").Err(); err != nil {
					t.Errorf("goroutine %d, INCR %d: %v", g, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n, err := c.Get(ctx, "shared").Int(); err != nil || n != 1600 {
		t.Errorf("shared counter %d %v, want 1600", n, err)
	}
	must("FLUSHALL", c.FlushAll(ctx).Err())
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Errorf("DBSIZE after FLUSHALL: %d %v", n, err)
	}

	goRedisPubSub(ctx, t, c)
}

// goRedisPubSub: go-redis's PubSub (Subscribe, PSubscribe, Receive,
// Channel) with messages published from the client's pool.
func goRedisPubSub(ctx context.Context, t *testing.T, c *redis.Client) {
	sub := c.Subscribe(ctx, "news")
	defer sub.Close()
	if m, err := sub.Receive(ctx); err != nil {
		t.Fatalf("SUBSCRIBE: %v", err)
	} else if s, ok := m.(*redis.Subscription); !ok || s.Kind != "subscribe" || s.Channel != "news" || s.Count != 1 {
		t.Fatalf("SUBSCRIBE confirmation: %#v", m)
	}
	if err := sub.PSubscribe(ctx, "n*"); err != nil {
		t.Fatalf("PSUBSCRIBE: %v", err)
	}
	if m, err := sub.Receive(ctx); err != nil {
		t.Fatalf("PSUBSCRIBE: %v", err)
	} else if s, ok := m.(*redis.Subscription); !ok || s.Kind != "psubscribe" || s.Count != 2 {
		t.Fatalf("PSUBSCRIBE confirmation: %#v", m)
	}
	ch := sub.Channel()
	const n = 100
	for i := range n {
		if got, err := c.Publish(ctx, "news", fmt.Sprint(i)).Result(); err != nil || got != 2 {
			t.Fatalf("PUBLISH %d: %d receivers, %v; want 2", i, got, err)
		}
	}
	for i := range n {
		for _, pattern := range []string{"", "n*"} {
			select {
			case m := <-ch:
				if m.Channel != "news" || m.Pattern != pattern || m.Payload != fmt.Sprint(i) {
					t.Fatalf("message %d: %+v, want pattern %q", i, m, pattern)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("message %d (pattern %q) did not come", i, pattern)
			}
		}
	}
	if got, err := c.PubSubNumSub(ctx, "news", "none").Result(); err != nil || got["news"] != 1 || got["none"] != 0 {
		t.Errorf("PUBSUB NUMSUB: %v %v", got, err)
	}
	if got, err := c.PubSubNumPat(ctx).Result(); err != nil || got != 1 {
		t.Errorf("PUBSUB NUMPAT: %v %v", got, err)
	}
	if got, err := c.PubSubChannels(ctx, "*").Result(); err != nil || strings.Join(got, ",") != "news" {
		t.Errorf("PUBSUB CHANNELS: %v %v", got, err)
	}
	if err := sub.Unsubscribe(ctx, "news"); err != nil {
		t.Fatalf("UNSUBSCRIBE: %v", err)
	}
	if err := sub.PUnsubscribe(ctx); err != nil {
		t.Fatalf("PUNSUBSCRIBE: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := c.Publish(ctx, "news", "late").Result()
		if err == nil && got == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PUBLISH after UNSUBSCRIBE: %d %v, want 0 receivers", got, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
