// Package dispatcher runs psp's request pipeline: one net-worker and
// dispatcher loop and a set of application workers (the paper's Figure 2).
//
// The loop receives a burst of packets from a nic.Dataplane, classifies the
// burst in one call (an app.Classifier: the native psp-header classifier or a
// Wasm host), enqueues each request on its typed queue in a darc.Policy, collects
// completion messages from the workers, asks the policy which request goes to
// which idle worker and pushes each request to that worker over a lock-free
// single-producer single-consumer ring. A worker runs the application (an
// app.Handler) on the request's buffer, which it rewrites in place into the
// response, transmits the response on its own TX queue and sends a completion
// (worker, type, start and end timestamps) back on its own ring, so the policy
// profiles real service times.
//
// # Concurrency
//
// Run owns the policy: only the dispatcher goroutine calls it. The
// dispatcher and each worker are one goroutine each, locked to their own OS
// thread when Spec.CPUs pins them (then each is pinned) or under busy-poll;
// under spin-then-park without pinning they stay unlocked and wait through
// the Go scheduler, which then needs a processor per thread that may sleep
// in the kernel (Spec.Procs: the server raises GOMAXPROCS to it; see
// lockThread for why not locked threads). Stats may be called from any
// goroutine: it returns the latest snapshot that the dispatcher goroutine
// publishes every Spec.StatsInterval through an atomic pointer, so status
// pages never touch the policy.
//
// # Serving in place
//
// Under IdleSpinThenPark, when the worker the policy chose for a request
// is parked and the request's type is expected (darc.ServiceEstimate over
// its measured services) to take less than Spec.InPlaceLimit, the
// dispatcher goroutine runs the request itself, as that worker: the
// application sees the chosen worker's id, the policy the same completion,
// and the worker's thread is never woken. Waking a parked thread costs
// tens of microseconds on a VM; a short request, one. Long and unprofiled
// types go to their worker's thread, and one dispatch round serves at
// most four limits' worth of expected service in place before handing
// off the rest, so receiving is never held for long. The replies of the
// requests served in one round leave in one batch on the dispatcher's own
// TX queue (the chosen worker's when the dataplane has none). Per type,
// TypeStats.InPlace counts them and TypeStats.HandOffs says why the others
// were handed off; their stages are recorded like any other's (handoff
// about zero, transmit including the wait for the round's batch).
//
// # Where a request's time goes
//
// Each worker records, per request type, how long its requests spent in
// each Stage (receive, queueing, handoff, service, transmit, and the whole
// latency in the server) from timestamps the pipeline takes anyway: the
// dataplane's receive time, the dispatcher's clock at accept and dispatch
// (carried in the task), and the worker's own at start, end and after the
// send (one clock read more per request, on the worker). It records into
// plain histograms of its own and publishes them every millisecond and
// whenever it goes idle (BenchmarkStageRecord: 20 ns per request, against
// 87 ns with atomic adds and 220-250 ns with Prometheus histograms); Stages
// sums them at scrape time. The dispatcher's own loop is unchanged.
//
// # Ownership
//
// The caller opens the dataplane and closes it after Run returns; the
// dispatcher never closes it. Every buffer the dispatcher receives is either
// transmitted by a worker or released to the dataplane, and every accepted
// request is accounted for: Received = Answered + Dropped (by reason) +
// InFlight.
//
// # Overload
//
// The dispatcher decides no limit; it wires the policy's (package darc) to
// the dataplane. New checks that the policy holds at most what the dataplane
// can lend (nic.BufferPool), so queued and running requests never take the
// buffers the receive path needs. Arrivals refused by the policy are dropped
// for reason "budget" or "queue_full", requests it expires for "expired",
// each counted under its type; an app.Admitter application refuses requests
// over its cap before they are queued ("service_cap"). An app.OverloadReplier
// application answers shed requests "overloaded" on the dispatcher's own TX
// queue (the dataplane's queue Spec.Workers). Stats.Overloaded and ShedRate
// say whether, and how fast, it sheds over the last second; each type's
// MaxWaitNs is its longest queue wait in the last stats interval.
//
// # Tenants
//
// A dispatcher serves tenants: Spec.Tenants with a TenantPolicy (darc
// Tenants, with shares; darc.Shared, a fixed set), or, with any other
// policy, one default tenant (DefaultTenant) of New's classifier, owning
// every port and the policy's whole type space. Each packet goes to the tenant its UDP
// destination port names (one table lookup; a tenant without ports gets
// the ports no one has; packets of no tenant are dropped, "no_tenant") and
// is classified by that tenant's classifier, in a call of its own, into its
// own type ids, which the policy's range for the tenant makes global. Where
// the call runs is the tenant's Isolation: IsolateAuto (the default) calls
// it on the dispatcher goroutine while it behaves and moves the tenant to
// its lane (a goroutine of its own fed over a single-producer
// single-consumer ring) from the first call that faults or takes longer
// than Spec.InlineLimit, back after Spec.LaneProbation clean calls there:
// one misbehaving call costs the others at most its own time (the
// classifier's fuel bounds it), then nothing. IsolateLane always uses the
// lane (a hand-off per burst: 100-300 µs on two shared cores),
// IsolateInline never (trusted, native classifiers). A lane holds at most
// Spec.LaneCapacity packets, all lanes Spec.LaneBuffers: past that a
// tenant's packets are dropped before classification ("classifier_busy"),
// counted against it. AddTenant, UpdateTenant and RemoveTenant change the
// tenants while Run runs (applied by the dispatcher goroutine between two
// iterations); a removed tenant's queued requests and the packets on its
// lane are dropped ("removed"), its running requests are answered. Stats
// has per-tenant counters (Stats.Tenants), and Received = Answered + Dropped
// + InFlight holds with InFlight counting the packets on lanes.
//
// A dispatcher of one tenant that owns every port and classifies inline
// (a lone classifier) skips the port lookup: that step is the one
// BenchmarkDispatcherStep measures.
//
// # Shutdown
//
// When Run's context is cancelled the loop stops receiving, keeps dispatching
// until the typed queues and the workers are empty (answering every request
// already accepted) or Spec.DrainTimeout has passed. Then it stops the
// workers: a worker returns the requests still in its ring unrun, and Run
// waits at most 100 ms for workers still in their handler, then returns
// without them (Stats.Abandoned; a handler that never returns cannot hold
// the shutdown). Whatever was still queued, running or unrun is dropped for
// reason "shutdown" (with an "overloaded" reply where the application gives
// one), so Run returns within DrainTimeout plus 100 ms.
//
// # Performance
//
// Measured on a 2-core VM (Go 1.26; noisy, several runs):
//
//	go test -run ^$ -bench DispatcherStep -benchtime 500000x ./dispatcher
//
// One core receiving bursts of 32 from the in-memory generator, classifying,
// enqueueing, dispatching through the policy to 32 worker rings and
// collecting completions (the benchmark goroutine also plays the workers, so
// the figure includes their ring operations): 80-110 ns per packet, 9-12.5
// million packets/s, with the native classifier and with the C psp-header
// Wasm classifier alike, for DARC and c-FCFS; 0 allocations (the paper's
// dispatcher: 7 Mpps). The policy runs with budgets over the dataplane's
// pool and automatic deadlines, as psp serve runs it: they cost +2% (geomean
// of the four cases against the same benchmark without them, in one
// session; within the noise). TestStepNoAlloc and TestPipelineStepNoAlloc
// assert zero allocations per burst for every policy and both classifiers,
// TestShedStepNoAlloc while shedding (budget drops, expiry, overloaded
// replies).
//
// BenchmarkPipeline runs the real goroutines (dispatcher plus one worker on
// the two cores): 0.50 Mpps answered with spin-then-park, 0.54 Mpps with
// busy-poll in one run (go test -run '^$' -bench Pipeline ./dispatcher); the
// figure moves a lot with whatever else the two cores run. The idle round trip of one request through the in-memory
// dataplane (dispatcher and worker both parked) is ~120µs on this VM.
package dispatcher
