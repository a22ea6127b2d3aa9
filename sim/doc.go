// Package sim is a discrete-event simulator of a request dispatcher with n
// workers fed by an open-loop Poisson process.
//
// It drives the policies of package darc (cfcfs, dfcfs, fp, darc-static,
// darc) exactly like the runtime dispatcher does (Enqueue on arrival,
// Complete on completion, Dispatch after every event), with the same
// budgets (Config.Darc.Pool) and queue deadlines: requests a policy refuses
// or expires are dropped and counted (report.Stats.Dropped, Expired), so an
// overloaded run predicts what a live server sheds; Config.Dilation runs the
// workload on an emulated server's time scale, where the deadline floor
// compares as it does live. It also simulates four preemptive policies of
// its own, without budgets or deadlines:
//
//   - ts: time sharing on one queue: a request runs for at most a quantum
//     (default 5us) while others wait; each preemption costs the worker
//     PreemptCost (default 1us) and the request goes back to the queue's
//     tail. With nobody waiting, a request keeps its worker at no cost. This
//     is a simplification of Shinjuku, not Shinjuku's discipline.
//   - ts-mq: the same with one queue per type, a worker taking from the
//     non-empty queue of the type with the shortest mean service time.
//   - shinjuku: Shinjuku's own discipline, as its prototype's dispatcher
//     runs it: one queue per type; a free worker takes the head of the
//     queue whose head has waited longest relative to its type's target
//     (its nominal mean service time: Shinjuku's per-type SLOs, BVT-style
//     selection); a slice that reaches the quantum is always preempted,
//     even with nothing waiting, and pays PreemptCost; the request returns
//     to the tail of its type's queue, keeping its arrival time, once the
//     switch is paid (another idle worker may then take it).
//   - preempt: one FIFO queue and no time slicing; when a short request (a
//     type of the shortest DARC group) has to wait, PreemptDelay later
//     (default 1us) a worker running a long request is preempted (the most
//     recently started one), pays PreemptCost, and takes the oldest short
//     request; the long request goes back to the tail.
//
// # The testbed
//
// Beyond the policy, a Config models what the paper's testbed adds:
//
//   - Phases: a workload that changes over time (workload.Phases), each
//     phase its own mix for its duration, at its own load or the run's;
//     the built-in "phase-change" is the paper's Figure 7.
//   - NetworkRTT: the network's round trip, added to latencies but not to
//     slowdowns (time in the server over service time).
//   - DispatcherRate: the one dispatcher's throughput; requests wait for it
//     in arrival order before reaching their queue.
//   - Misclassify: a classifier that gives a fraction of the requests
//     another type; the policy sees that type, the results the true one.
//   - Conns: clients on in-order connections (TCP), each request on an
//     idle one if any, else the one with the fewest unanswered, as
//     client libraries' pools send (or round robin: ConnPick): a reply
//     leaves after the earlier ones of its connection, and latency runs
//     to it.
//   - Timeline: per-type p99.9 latency and slowdown over time, with the
//     reservations DARC adopts (report.Timeline); PhaseReservations tells
//     how long DARC took to reach each phase's nominal reservation
//     (NominalReservation).
//
// # Measurement
//
// Requests arrive during Config.Duration of simulated time; those still in
// the system then run to completion. Requests arriving in the first
// Config.Warmup fraction (default 10%) are not recorded. Over the window
// [warm-up, Duration] the simulator measures the achieved throughput
// (completions per second), the mean number of idle workers (DARC's CPU
// waste; preemption costs count as busy) and drops. A load point is
// sustained when nothing was dropped and the number of requests in the
// system grew by at most 0.1% of the window's arrivals (or by the number of
// workers, whichever is larger). Latency is from arrival to completion;
// slowdown is latency over the request's service time (preemption costs
// excluded from the denominator).
//
// Runs are deterministic for a seed; every policy sees the same arrivals.
// The simulator is validated against closed forms (M/M/1, M/M/c with
// Erlang C, M/D/1 with Pollaczek-Khinchine, d-FCFS with round-robin
// spreading as independent E_c/M/1 queues) in its tests.
//
// # Performance
//
// The non-preemptive engine keeps the next arrival and a binary heap of
// completions; the preemptive one adds per-worker slice events invalidated
// by version numbers. Neither allocates per event (TestNoAllocPerEvent).
// BenchmarkSimulate5Mrps simulates one second of extreme-bimodal at 5
// million requests per second on 16 workers under each policy; report's
// BenchmarkRecord and workload's BenchmarkSampler measure a sample's
// recording and a workload draw (BENCHMARKS.md).
//
// # Concurrency
//
// Run is safe to call from several goroutines (each run owns its state);
// RunSweep runs Sweep.Parallel simulations at once. Nothing needs closing.
package sim
