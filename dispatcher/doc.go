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
// Under IdleSpinThenPark, when the worker the policy chose is parked and the
// request's type is expected (darc.ServiceEstimate) to take less than
// Spec.InPlaceLimit, the dispatcher goroutine runs the request itself, as
// that worker: the application sees the chosen worker's id, the policy the
// same completion, and the worker's thread is never woken (a wake-up costs
// more than a short request). Long and unprofiled types go to their
// worker's thread; one round serves at most four limits' worth in place, and
// its replies leave in one batch. TypeStats.InPlace and HandOffs count both.
// A request served in place right after another starts when that one
// ended, without a clock read of its own: its service time includes the
// policy's pick of it, some tens of ns.
//
// # Where a request's time goes
//
// Each worker records, per type, how long its requests spent in each Stage
// (receive, queueing, handoff, service, transmit, and the whole latency)
// from timestamps the pipeline takes anyway, into plain histograms of its
// own that it publishes every millisecond and whenever it goes idle; Stages
// sums them at scrape time.
//
// # Ownership and accounting
//
// The caller opens the dataplane and closes it after Run returns; the
// dispatcher never closes it. Every buffer received is either transmitted
// or released to the dataplane, and every accepted request is accounted
// for: Received = Answered + Dropped (by reason) + InFlight. A request
// chained to another (nic.Buffer.Next, a stream connection's request that
// must wait for the one before it) is received when that one completes or
// is dropped, as if it had just come from the dataplane, and dropped at
// shutdown with it.
//
// # Parked requests
//
// A handler that cannot answer yet (a Redis BLPOP on an empty list) parks
// its request (app.Reply.Park): its worker is free at once, and the
// dispatcher keeps the request, with the requests chained behind it, in no
// queue (Stats.Parked, in InFlight) until the application's app.Parker
// unparks it or its time limit passes; it is then queued again under its
// type, flagged nic.Resumed. Shutdown drops parked requests ("shutdown").
//
// # Overload
//
// The dispatcher decides no limit; it wires the policy's (package darc) to
// the dataplane, and New checks that the policy holds at most what the
// dataplane can lend. Drops are counted by reason and type: "budget",
// "queue_full", "expired", "service_cap" (an app.Admitter's refusal); an
// app.OverloadReplier application answers shed requests on the
// dispatcher's own TX queue.
//
// # Tenants
//
// A dispatcher serves tenants (Spec.Tenants with a TenantPolicy, or one
// DefaultTenant owning every port). Each packet goes to the tenant its
// destination port names (packets of none are dropped, "no_tenant") and is
// classified by that tenant's classifier, in a call of its own, into its
// own type ids. Where the call runs is the tenant's Isolation: IsolateAuto
// calls it on the dispatcher goroutine while it behaves and moves the
// tenant to its lane (a goroutine of its own) from the first call that
// faults or takes longer than Spec.InlineLimit, back after
// Spec.LaneProbation clean calls; IsolateLane always uses the lane,
// IsolateInline never. A full lane drops the tenant's packets
// ("classifier_busy"). AddTenant, UpdateTenant and RemoveTenant change the
// tenants while Run runs; a removed tenant's queued requests are dropped
// ("removed"), its running ones answered.
//
// # Shutdown
//
// When Run's context is cancelled the loop stops receiving and keeps
// dispatching until the queues and workers are empty or Spec.DrainTimeout
// has passed; then it stops the workers, waits at most 100 ms for those
// still in their handler (Stats.Abandoned), and drops what is left for
// reason "shutdown". Run returns within DrainTimeout plus 100 ms.
//
// BenchmarkDispatcherStep (one core, in-memory dataplane: classify, queue,
// dispatch, rings), BenchmarkPipeline (the real goroutines) and
// BenchmarkStageRecord measure the loop (BENCHMARKS.md); TestStepNoAlloc,
// TestPipelineStepNoAlloc and TestShedStepNoAlloc assert it allocates
// nothing per burst.
package dispatcher
