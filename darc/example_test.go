package darc_test

import (
	"fmt"

	"github.com/persephone-go/psp/darc"
)

// The High Bimodal workload on 14 workers: the short type's demand (0.14
// workers) rounds up to one reserved worker; the long type wants 14, more
// than the 13 left, so it takes them all plus the spillway worker (13).
func ExampleReserve() {
	groups, err := darc.Reserve([]darc.TypeProfile{
		{Type: 1, MeanNs: 1000, Ratio: 0.5},   // SHORT, 1 µs
		{Type: 2, MeanNs: 100000, Ratio: 0.5}, // LONG, 100 µs
	}, 14, 1, 0.2)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, g := range groups {
		fmt.Printf("types %v demand %.2f reserved %v stealable %v spillway %v\n",
			g.Types, g.Demand, g.Reserved, g.Stealable, g.Spillway)
	}
	// Output:
	// types [1] demand 0.14 reserved [0] stealable [1 2 3 4 5 6 7 8 9 10 11 12 13] spillway false
	// types [2] demand 13.86 reserved [1 2 3 4 5 6 7 8 9 10 11 12 13] stealable [] spillway true
}

// A driver's loop: enqueue classified requests, dispatch them to idle
// workers, report completions. With a nominal profile DARC starts with its
// reservation: SHORT (type 1) owns worker 0 and LONG (type 2) workers 1-3.
func ExampleNew() {
	policy, err := darc.New("darc", darc.Config{
		Workers:   4,
		TypeNames: []string{"UNKNOWN", "SHORT", "LONG"},
		Profile: []darc.TypeProfile{
			{Type: 1, MeanNs: 1000, Ratio: 0.5},
			{Type: 2, MeanNs: 100000, Ratio: 0.5},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for h := range uint64(5) {
		policy.Enqueue(darc.Request{Handle: h, Type: 2}, 0) // five LONG
	}
	policy.Enqueue(darc.Request{Handle: 5, Type: 1}, 0) // one SHORT
	out := make([]darc.Assignment, 4)
	n := policy.Dispatch(0, out)
	for _, a := range out[:n] {
		fmt.Printf("worker %d runs request %d (type %d)\n", a.Worker, a.Request.Handle, a.Request.Type)
	}
	// The SHORT request is done: its worker stays idle for the next SHORT one.
	policy.Complete(0, 1, 1000, 1000)
	fmt.Println("dispatched after SHORT completes:", policy.Dispatch(1000, out))

	var s darc.Snapshot
	policy.Snapshot(&s)
	fmt.Printf("LONG queued: %d, idle workers: %d\n", s.Types[2].Queued, s.IdleWorkers)
	// Output:
	// worker 0 runs request 5 (type 1)
	// worker 1 runs request 0 (type 2)
	// worker 2 runs request 1 (type 2)
	// worker 3 runs request 2 (type 2)
	// dispatched after SHORT completes: 0
	// LONG queued: 2, idle workers: 1
}

// Two tenants on seven workers: "kv" is guaranteed three and reserves one
// of them for its GETs, two for its SCANs (from its nominal profile);
// "batch" gets the other four by weight. While kv is idle, batch borrows
// one of kv's SCAN workers; kv keeps its GET worker for its GETs (as DARC
// does: batch's requests are not ten times shorter than a GET) and one
// SCAN worker as a spare, so kv's requests that arrive run at once.
func ExampleTenants() {
	policy, err := darc.New("darc", darc.Config{
		Workers:    7,
		MinSamples: 1000,
		Tenants: []darc.TenantConfig{
			{Name: "kv", NumTypes: 3, TypeNames: []string{"UNKNOWN", "GET", "SCAN"}, Workers: 3,
				Profile: []darc.TypeProfile{{Type: 1, MeanNs: 1500, Ratio: 0.5}, {Type: 2, MeanNs: 635000, Ratio: 0.5}}},
			{Name: "batch", NumTypes: 2},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	tenants := policy.(*darc.Tenants)
	kv, _ := tenants.Base("kv")       // kv's local type 0; GET is kv+1, SCAN kv+2
	batch, _ := tenants.Base("batch") // batch's local type 0; its job type is batch+1
	for h := range uint64(8) {
		policy.Enqueue(darc.Request{Handle: h, Type: batch + 1}, 0)
	}
	out := make([]darc.Assignment, 7)
	n := policy.Dispatch(0, out)
	fmt.Printf("batch runs %d requests, one on kv's worker %d\n", n, out[n-1].Worker)
	policy.Enqueue(darc.Request{Handle: 100, Type: kv + 1}, 1) // a GET
	policy.Enqueue(darc.Request{Handle: 101, Type: kv + 2}, 1) // a SCAN
	n = policy.Dispatch(1, out)
	for _, a := range out[:n] {
		fmt.Printf("worker %d runs kv's request %d\n", a.Worker, a.Request.Handle)
	}
	policy.Complete(2, batch+1, 500000, 2) // the worker kv lent comes back
	fmt.Println("dispatched when it comes back:", policy.Dispatch(2, out))

	var s darc.Snapshot
	policy.Snapshot(&s)
	for _, t := range s.Tenants {
		fmt.Printf("%s: home %v, busy %d (borrowed %d), lent %d, queued %d\n", t.Name, t.Home, t.Busy, t.Borrowed, t.Lent, t.Queued)
	}
	// Output:
	// batch runs 5 requests, one on kv's worker 2
	// worker 0 runs kv's request 100
	// worker 1 runs kv's request 101
	// dispatched when it comes back: 0
	// kv: home [0 1 2], busy 2 (borrowed 0), lent 0, queued 0
	// batch: home [3 4 5 6], busy 4 (borrowed 0), lent 0, queued 3
}
