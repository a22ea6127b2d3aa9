// Package darc holds Perséphone's scheduling policies: DARC (Dynamic
// Application-aware Reserved Cores) and the policies it is compared against,
// c-FCFS, d-FCFS, fixed priority (FP) and DARC-static.
//
// The package is pure: standard library only, no I/O, no goroutines and no
// clock (every time is an int64 of nanoseconds passed in by the driver). The
// runtime dispatcher and the simulator drive the very same code through the
// Policy interface of api.go:
//
//	p, err := darc.New("darc", darc.Config{Workers: 14, NumTypes: 3, Pool: 8160})
//	v := p.Enqueue(darc.Request{Handle: h, Type: typ}, now) // not Accepted: dropped (QueueFull, OverBudget)
//	n := p.Dispatch(now, out)                               // out[:n]: (worker, request) pairs; Worker == Expired: drop
//	p.Complete(worker, typ, serviceNs, now)                 // the worker is idle again
//
// # Concurrency and ownership
//
// A Policy is not safe for concurrent use: one goroutine owns it. It holds no
// resources: nothing to close. Every queue and table is allocated by the
// constructor; Enqueue, Dispatch and Complete allocate nothing (tested with
// testing.AllocsPerRun), and Snapshot allocates only when the Snapshot it is
// given has slices too small.
//
// # Queues, budgets and deadlines
//
// Requests wait in bounded FIFOs: one per type (DARC, DARC-static, FP;
// c-FCFS's central FIFO admits at most a type's capacity of each type) or
// one per worker (d-FCFS); type ids out of range are Unknown. Three limits
// keep the types apart, each counted against the type that hit it: its
// budget of the pool the driver lends (Config.Pool: half divided into
// per-type guarantees, half shared; OverBudget), its queue's capacity
// (QueueFull), and its deadline (Config.DeadlineFactor times the longest
// mean service time that can hold up its workers, at least DeadlineFloor
// (200 ms)): Dispatch hands an expired request back with Worker == Expired,
// so after an overload the workers serve fresh requests.
//
// # Policies
//
//   - cfcfs: one FIFO in arrival order; the head goes to the lowest idle worker.
//   - dfcfs: one FIFO per worker, arrivals spread round-robin; no stealing.
//   - fp: non-preemptive shortest-type-first, any worker; Unknown last.
//   - darc-static: DARC with Config.StaticReserved workers for the shortest type.
//   - darc: startup in c-FCFS for Config.MinSamples completions, then
//     reservations (Algorithm 2, see Reserve) and worker selection
//     (Algorithm 1): see DARC for the update and absent-type rules.
//
// In DARC and DARC-static, Unknown requests run only on the spillway
// worker(s), the last Config.Spillway worker ids, after every known type;
// the baselines treat Unknown as any other type (FP: last).
//
// With Config.Tenants the policy is multi-tenant (DARC and DARC-static):
// each tenant has its own type space (a range of the global ids), its own
// DARC over its home workers, and its own part of the pool; idle workers
// are lent to the tenants furthest below their share and come back at the
// next dispatch decision after the borrowed request. Tenants are added,
// updated and removed at run time (AddTenant, UpdateTenant, RemoveTenant).
//
// # Choices where the paper and the prototype leave room
//
//   - DARC's startup phase ends after MinSamples completions of known types
//     (the prototype counts dispatches); Unknown completions are not profiled.
//   - The update check looks at the second-oldest queued request of each type,
//     as the prototype does, with a threshold of DelayFactor times the type's
//     mean (default 1, the prototype's; the paper uses 10).
//   - A profiling window is also checked when it reaches Config.MaxWindow
//     completions (default 2 x MinSamples), backlog or not, so that at low
//     rates a window does not span a whole phase of the workload.
//   - Algorithm 1 walks types; DARC walks groups, and serves the types of a
//     group as one class, oldest queue head first, so two alike types (a
//     random classifier's) are served as c-FCFS would.
//   - The deviation rule works per group: a group's new demand is compared
//     with the demand it was reserved for, and the move must exceed
//     DemandDeviation times the group's allocation in workers (the prototype
//     compares per-type demands); a change in the active types or in their
//     grouping always re-reserves.
//   - Hysteresis (neither the paper nor the prototype has it): when an
//     update keeps the groups, a group keeps its worker count w while its new
//     demand stays within [w-0.5-h, w+0.5+h], h = Config.Hysteresis (default
//     0.25); beyond that band it takes Algorithm 2's rounding, so window
//     noise around a half worker does not flip a reservation.
//   - A type absent from the window keeps its last mean for the dispatch
//     order (the prototype sends it last) and gets no group (the prototype
//     gives it one worker); it runs on the longest group's workers.
//   - With more groups than workers, the groups left without workers share the
//     spillway worker(s), as in the prototype.
//
// RATIONALE.md says why each default is what it is; BenchmarkCycle,
// BenchmarkBurst, BenchmarkComplete, BenchmarkReservationUpdate and
// BenchmarkManyTypes measure the policy's costs (BENCHMARKS.md).
package darc
