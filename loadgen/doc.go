// Package loadgen is psp's open-loop load generator: it sends psp-header
// requests over UDP at the times of a precomputed, seeded Poisson schedule,
// whatever the server's replies do, and measures each request's latency from
// its intended send time, so a slow server cannot slow the client down and
// hide its own queueing (no coordinated omission), to the reply's arrival:
// the kernel's receive timestamp where the socket provides one (Linux), so
// that the time the receiving goroutine waited to run is not counted.
// Spec.FromActualSend measures from the actual send instead, leaving out the
// sender's own lag behind its schedule.
//
// # Schedule
//
// NewSchedule draws every request up front: its send time (exponential
// inter-arrival gaps at the requested rate), its type and its service time,
// from a workload.Workload and a seed. The same seed gives the same schedule.
// Request i carries id i in its psp header (wire.Header): replies are matched
// to requests through a preallocated table indexed by id.
//
// # Request formats
//
// FormatPSP (the default) sends the bare 16-byte psp header with the
// nominal service time, for the spin, emulate and tpcc applications.
// FormatKV sends the kv application's requests (package app/kv: a header of
// type GET or SCAN followed by a key "k00042"), for the rocksdb workload;
// there the server does real work and slowdowns are computed against the
// workload's nominal service times.
//
// # Dilation
//
// Servers running the emulate application sleep for the header's service
// time multiplied by their dilation factor (a nominal 1 µs sleeps 1 ms at 1000), so
// microsecond workloads can be emulated on machines with fewer cores than
// workers. The header always carries the nominal (undilated) service time;
// Spec.Dilation must match the server's: the client uses it to derive the
// rate from a target load and to compute slowdowns as
// latency / (service time × dilation).
//
// # Statistics
//
// Latency and slowdown histograms (HdrHistogram) are kept per type and
// overall, after discarding the earliest requests as warm-up (10% of the
// schedule by default). A reply that arrives after the end of the schedule
// plus Spec.Grace is counted as late; a request never answered is lost. A run
// is sustained only when at least 99.9% of the requests were answered in
// time and the sender kept to its schedule (its 99th-percentile lag stayed
// under Spec.MaxLag).
//
// # Concurrency
//
// Run uses one connected UDP socket. The sender is the calling goroutine:
// between sends it sleeps in the Go runtime's timer until 2 ms before the
// next send (the timer can be a millisecond late), then with nanosleep(2)
// at a 1 µs timer slack, then spins the last Spec.SpinWindow without
// yielding. It is not locked to its thread: a locked goroutine that
// sleeps in system calls gets preempted by the runtime every 10 ms, which
// hands its processor to another thread and back. Datagrams due together leave in one sendmmsg(2)
// (golang.org/x/net's WriteBatch). One receiver goroutine records reply
// times into a table preallocated per request id; a third goroutine calls
// Spec.Progress. Run closes the socket and joins its goroutines before it
// returns. Sending, matching a reply and recording allocate nothing.
//
// A Schedule is read-only during a run and may be reused by several runs,
// one at a time or concurrently; each run owns its own socket and tables.
package loadgen
