package memcached

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// TestReadCacheAgreesWithStore: a random sequence of every command that
// reads or writes an item (sets of every kind, cas, incr and decr,
// touch, gat, delete, flush_all, values around the longest the cache
// holds) gets the same replies from a server whose index caches values
// within a budget too small for all of them as from one that reads every
// value from Pebble.
func TestReadCacheAgreesWithStore(t *testing.T) {
	cached := openServer(t, Config{ReadCache: 3 * maxCachedValue})
	plain := openServer(t, Config{ReadCache: -1})
	rng := rand.New(rand.NewPCG(1, 2))
	value := func() string {
		n := rng.IntN(64)
		switch rng.IntN(8) {
		case 0:
			n = maxCachedValue - headerLen + rng.IntN(3) - 1 // around the longest cached
		case 1:
			n = maxCachedValue / 2
		}
		return strings.Repeat(string(rune('a'+rng.IntN(26))), n)
	}
	for i := range 3000 {
		key := fmt.Sprintf("k%d", rng.IntN(12))
		var body string
		switch op := rng.IntN(14); op {
		case 0, 1, 2, 3, 4:
			cmd := []string{"set", "add", "replace", "append", "prepend"}[op]
			v := value()
			body = fmt.Sprintf("%s %s %d 0 %d\r\n%s\r\n", cmd, key, rng.IntN(3), len(v), v)
		case 5:
			// cas with the id gets returns now, or a stale one.
			gets := text(exchange(cached, 0, "gets "+key+"\r\n"))
			if gets != text(exchange(plain, 0, "gets "+key+"\r\n")) {
				t.Fatalf("op %d: gets %s differ", i, key)
			}
			id := "1"
			if f := strings.Fields(strings.SplitN(gets, "\r\n", 2)[0]); len(f) == 5 && rng.IntN(4) > 0 {
				id = f[4]
			}
			v := value()
			body = fmt.Sprintf("cas %s 0 0 %d %s\r\n%s\r\n", key, len(v), id, v)
		case 6:
			body = fmt.Sprintf("set %s 0 0 2\r\n%d\r\nincr %s 7\r\n", key, 10+rng.IntN(90), key)
		case 7:
			body = fmt.Sprintf("incr %s %d\r\ndecr %s 3\r\n", key, rng.IntN(100), key)
		case 8:
			body = fmt.Sprintf("touch %s %d\r\n", key, rng.IntN(2)*1000)
		case 9:
			body = fmt.Sprintf("gat 0 %s\r\n", key)
		case 10:
			body = "delete " + key + "\r\n"
		case 11:
			if rng.IntN(20) == 0 {
				body = "flush_all\r\n"
			} else {
				body = "get " + key + " k1 k2\r\n"
			}
		default:
			body = "gets " + key + "\r\n"
		}
		got, want := text(exchange(cached, 0, body)), text(exchange(plain, 0, body))
		if got != want {
			t.Fatalf("op %d %.60q:\n cached %.120q\n  plain %.120q", i, body, got, want)
		}
	}
	cached.sessions[0].st.ix.mu.Lock()
	used := cached.sessions[0].st.ix.cachedBytes
	cached.sessions[0].st.ix.mu.Unlock()
	if used <= 0 || used > 3*maxCachedValue {
		t.Errorf("cache holds %d bytes, want some, within %d", used, 3*maxCachedValue)
	}
}

// TestReadCacheNeverTorn: gets racing sets of the same keys on other
// workers read whole values, each one a set wrote (run with -race).
func TestReadCacheNeverTorn(t *testing.T) {
	const workers, rounds = 4, 300
	srv := openServer(t, Config{Workers: workers})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				key := fmt.Sprintf("k%d", r%3)
				if w%2 == 0 {
					n := 1 + (r*7+w)%200
					v := strings.Repeat(string(rune('a'+w)), n)
					exchange(srv, w, fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", key, n, v))
					continue
				}
				got := text(exchange(srv, w, "get "+key+"\r\n"))
				if got == "END\r\n" {
					continue
				}
				var n int
				if _, err := fmt.Sscanf(got, "VALUE "+key+" 0 %d\r\n", &n); err != nil {
					t.Errorf("worker %d: %.60q: %v", w, got, err)
					return
				}
				head := fmt.Sprintf("VALUE %s 0 %d\r\n", key, n)
				v := []byte(strings.TrimSuffix(strings.TrimPrefix(got, head), "\r\nEND\r\n"))
				if len(v) != n || len(bytes.Trim(v, string(v[:1]))) != 0 {
					t.Errorf("worker %d: torn value %.60q", w, got)
					return
				}
			}
		})
	}
	wg.Wait()
}
