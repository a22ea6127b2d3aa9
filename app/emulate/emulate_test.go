package emulate

import (
	"errors"
	"fmt"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/app/spin"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/wire"
)

func TestHandleEchoesAndWaitsDilated(t *testing.T) {
	h, err := New(Config{Dilation: 100})
	if err != nil {
		t.Fatal(err)
	}
	b := &nic.Buffer{Data: make([]byte, 64)}
	wire.Header{ID: 7, Type: wire.TypeLong, ServiceNs: 20_000}.Encode(b.Data) // 20µs x 100 = 2ms
	b.Len = 40
	start := time.Now()
	if !h.Handle(0, 2, b) {
		t.Fatal("Handle refused a valid request")
	}
	if el := time.Since(start); el < 2*time.Millisecond {
		t.Errorf("waited %v, want at least 2ms", el)
	}
	got, _ := wire.Decode(b.Payload())
	if b.Len != wire.HeaderLen || got.ID != 7 || got.Type != wire.TypeLong {
		t.Errorf("reply len %d header %+v, want the echoed 16-byte header", b.Len, got)
	}
	b.Len = 5
	if h.Handle(0, 0, b) {
		t.Error("Handle accepted a 5-byte runt")
	}
}

func TestConfigValidate(t *testing.T) {
	if _, err := New(Config{Dilation: -1}); !errors.Is(err, ErrConfig) {
		t.Errorf("negative dilation: %v, want ErrConfig", err)
	}
	s, err := NewSleeper(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Dilation() != DefaultDilation {
		t.Errorf("default dilation %g", s.Dilation())
	}
}

// BenchmarkSleep measures Go's sleep overshoot and the Sleeper's error on
// this machine (reported as p50/p99 overshoot in µs).
func BenchmarkSleep(b *testing.B) {
	runtime.LockOSThread() // like a worker: nanosleep blocks this thread
	defer runtime.UnlockOSThread()
	s, _ := NewSleeper(Config{Dilation: 1})
	for _, d := range []time.Duration{200 * time.Microsecond, time.Millisecond, 5 * time.Millisecond} {
		for _, mode := range []string{"time.Sleep", "nanosleep", "Sleeper"} {
			b.Run(fmt.Sprintf("%s/%v", mode, d), func(b *testing.B) {
				errs := make([]time.Duration, 0, b.N)
				for i := 0; i < b.N; i++ {
					start := time.Now()
					switch mode {
					case "Sleeper":
						s.WaitExactly(d)
					case "nanosleep":
						threadSleep(d)
					default:
						time.Sleep(d)
					}
					errs = append(errs, time.Since(start)-d)
				}
				sort.Slice(errs, func(i, j int) bool { return errs[i] < errs[j] })
				b.ReportMetric(float64(errs[len(errs)/2].Microseconds()), "p50-over-µs")
				b.ReportMetric(float64(errs[len(errs)*99/100].Microseconds()), "p99-over-µs")
			})
		}
	}
}

func TestHandleRefusesAbsurdServiceTimes(t *testing.T) {
	h, _ := New(Config{Dilation: 1000})
	b := &nic.Buffer{Data: make([]byte, 16), Len: 16}
	wire.Header{ID: 1, Type: 1, ServiceNs: 0xffffffff}.Encode(b.Data) // 4.3s x 1000
	start := time.Now()
	if h.Handle(0, 1, b) {
		t.Error("a 4.3s request was accepted")
	}
	if el := time.Since(start); el > 100*time.Millisecond {
		t.Errorf("refusing took %v", el)
	}
}

// The cap is on the nominal time: 9.99ms asked at a dilation of 1000 would
// hold a worker for 10s; the default cap (1ms) refuses it at once, a raised
// one lets it through.
func TestServiceCap(t *testing.T) {
	h, _ := New(Config{Dilation: 1000})
	b := &nic.Buffer{Data: make([]byte, 16), Len: 16}
	wire.Header{ID: 1, Type: 3, ServiceNs: 9_990_000}.Encode(b.Data)
	start := time.Now()
	if got := h.Serve(0, 3, b); got != app.RefuseOverCap {
		t.Errorf("9.99ms under the default cap: %v, want RefuseOverCap", got)
	}
	if el := time.Since(start); el > 100*time.Millisecond {
		t.Errorf("refusing took %v", el)
	}
	wire.Header{ID: 2, Type: 1, ServiceNs: 20}.Encode(b.Data) // 20µs at x1000
	if got := h.Serve(0, 1, b); got != app.Answer {
		t.Errorf("20ns: %v, want Answer", got)
	}
	small, _ := New(Config{Dilation: 1, MaxService: spin.Cap(10 * time.Nanosecond)})
	b.Len = 16
	if got := small.Serve(0, 1, b); got != app.RefuseOverCap {
		t.Errorf("20ns under a 10ns cap: %v, want RefuseOverCap", got)
	}
	if _, err := New(Config{MaxService: -1}); err == nil {
		t.Error("a negative cap was accepted")
	}
}
