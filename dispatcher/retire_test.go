package dispatcher

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/wire"
)

// TestTenantChurnStaysFlat: adding and removing a
// 1,024-type tenant 100 times, with traffic each time, neither runs out of
// type ids (65,536: 64 such tenants without reuse) nor grows the type
// space, the stats pass, the stage histograms or the heap: removed tenants
// beyond the last keepRemoved are retired and their ids reused, their
// counters and histograms starting from zero.
func TestTenantChurnStaysFlat(t *testing.T) {
	const cycles, bigTypes = 100, 1024
	dp := newFakeDataplane(2, 512, 64)
	policy, err := darc.New(darc.NameDARC, darc.Config{Workers: 2, QueueCapacity: 4, MinSamples: 1 << 20, DeadlineFactor: -1, Tenants: []darc.TenantConfig{
		{Name: "a", NumTypes: HeaderNumTypes, TypeNames: HeaderTypeNames()},
	}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Spec{Workers: 2, Spin: -1, StatsInterval: time.Millisecond,
		Tenants: []TenantSpec{{Name: "a", Ports: []uint16{portA}, Classifier: HeaderClassifier{}}}}, dp, nil, policy, echo)
	if err != nil {
		t.Fatal(err)
	}
	stop := runTenants(t, d)
	ctx := context.Background()
	sent := 0
	send := func(port uint16, typ uint32, n int) {
		for range n {
			for !dp.inject(header(uint32(sent), typ, 0), port) {
				time.Sleep(100 * time.Microsecond)
			}
			sent++
		}
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	statsPass := func() { // a stats pass after now retires what it can
		after := dp.Now()
		waitFor(t, "a stats pass", func() bool { return d.Stats().At > after })
	}
	var heapAt30 uint64
	var typesAt30 int
	for i := range cycles {
		name := fmt.Sprintf("big%d", i)
		base, err := d.AddTenant(ctx, TenantSpec{Name: name, Ports: []uint16{portB}, Classifier: HeaderClassifier{},
			Share: darc.TenantConfig{NumTypes: bigTypes}})
		if err != nil {
			t.Fatalf("cycle %d: add: %v", i, err)
		}
		send(portB, wire.TypeShort, 3)
		send(portA, wire.TypeShort, 1)
		// Generous: under the race detector beside other packages' tests
		// a cycle has taken more than 10 s.
		deadline := time.Now().Add(30 * time.Second)
		for s := d.Stats(); s.Answered != uint64(sent); s = d.Stats() {
			if time.Now().After(deadline) || s.Answered+s.Dropped >= uint64(sent) {
				t.Fatalf("cycle %d: %d of %d requests answered, %d dropped (%v)", i, s.Answered, sent, s.Dropped, s.Drops)
			}
			time.Sleep(time.Millisecond)
		}
		s := d.Stats()
		for _, ts := range s.Tenants {
			if ts.Name == name && (ts.Base != base || ts.Received != 3 || ts.Answered != 3) {
				t.Fatalf("cycle %d: the new tenant starts from zero: %+v", i, ts)
			}
		}
		if st := d.Stages(); int(base)+int(wire.TypeShort) < len(st) {
			if h := st[int(base)+int(wire.TypeShort)]; h == nil || h[StageService].Count != 3 {
				t.Fatalf("cycle %d: stage histograms of the new tenant's SHORT: %+v", i, h)
			}
		}
		if err := d.RemoveTenant(ctx, name); err != nil {
			t.Fatalf("cycle %d: remove: %v", i, err)
		}
		if i == 30 {
			statsPass()
			heapAt30, typesAt30 = heap(), len(d.Stats().Types)
		}
	}
	statsPass()
	s := d.Stats()
	if max := 1 + HeaderNumTypes + (keepRemoved+2)*bigTypes; len(s.Types) > max {
		t.Fatalf("type space after %d cycles: %d types (after 30: %d; at most %d)", cycles, len(s.Types), typesAt30, max)
	}
	if len(s.Tenants) > 1+keepRemoved+1 {
		t.Fatalf("%d tenants in the stats pass, want a and at most %d removed ones", len(s.Tenants), keepRemoved+1)
	}
	// Readings move in steps of about 4 MiB (a copy of a per-type table
	// live or not): 18-26 MiB at the same 9,229 types, in both places, so
	// the bound is twice the reading after 30 cycles. The heap holds about
	// 22 MiB with nine 1,024-type ranges: removed tenants kept alive would
	// add far more than that over the 70 cycles between the readings.
	if h := heap(); h > 2*heapAt30 {
		t.Fatalf("heap %d MiB after %d cycles, %d MiB after 30", h>>20, cycles, heapAt30>>20)
	}
	a := tenantStat(t, s, "a")
	if a.Received != cycles || a.Answered != cycles {
		t.Fatalf("a: %+v", a)
	}
	final, err := stop()
	if err != nil {
		t.Fatal(err)
	}
	checkTenantAccounting(t, final)
}
