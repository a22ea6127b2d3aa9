// Package loadgen is psp's open-loop load generator: it sends psp-header
// requests over UDP at the times of a precomputed, seeded Poisson schedule,
// whatever the server's replies do, and measures each request's latency from
// its intended send time, so a slow server cannot slow the client down and
// hide its own queueing (no coordinated omission).
//
// # Schedule
//
// NewSchedule draws every request up front: its send time (exponential
// inter-arrival gaps at the requested rate), its type and its service time,
// from a workload.Workload and a seed. The same seed gives the same schedule.
// Request i carries id i in its psp header (wire.Header): replies are matched
// to requests through a preallocated table indexed by id.
//
// # Dilation
//
// Servers running the emulate application sleep for the header's service
// time multiplied by their dilation factor (1 µs becomes 1 ms at 1000), so
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
// Run uses one connected UDP socket, one sender goroutine and one receiver
// goroutine; it closes the socket and joins both goroutines before it
// returns. A Schedule is read-only during a run and may be reused by several
// runs, one at a time or concurrently.
package loadgen
