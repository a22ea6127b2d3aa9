package loadgen

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/workload"
)

// TestValueSizeFitsADatagram: MaxValueSize is the largest value size the
// spec accepts (its sets fit one UDP datagram), Validate refuses one more
// before anything is sent, and PreloadMemcached refuses it before it
// dials (it used to time out and ask whether a server was listening).
func TestValueSizeFitsADatagram(t *testing.T) {
	w, err := workload.Builtin("memcached")
	if err != nil {
		t.Fatal(err)
	}
	sched, err := NewSchedule(&w, 1000, 10*time.Millisecond, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, keys := range []int{0, 1, 100, MaxMemcachedKeys} {
		most := MaxValueSize(keys)
		if most < 60000 || most >= maxDatagram {
			t.Errorf("%d keys: MaxValueSize %d", keys, most)
		}
		ok := Spec{Format: FormatMemcached, MemcachedKeys: keys, ValueSize: most}
		if err := ok.Validate(sched); err != nil {
			t.Errorf("%d keys, value size %d: %v", keys, most, err)
		}
		over := Spec{Format: FormatMemcached, MemcachedKeys: keys, ValueSize: most + 1}
		if err := over.Validate(sched); !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), "fit one UDP datagram") {
			t.Errorf("%d keys, value size %d: %v, want ErrBadSpec", keys, most+1, err)
		}
	}
	for _, size := range []int{70000, MaxValueSize(DefaultMemcachedKeys) + 1} {
		// 192.0.2.1 (TEST-NET-1) answers nothing: an error within the
		// second can only be the refusal.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := PreloadMemcached(ctx, "192.0.2.1:11211", DefaultMemcachedKeys, size)
		cancel()
		if !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), "does not fit one UDP datagram") {
			t.Errorf("preload of %d-byte values: %v, want ErrBadSpec", size, err)
		}
	}
}
