// Package dispatcher runs psp's request pipeline: one net-worker and
// dispatcher loop and a set of application workers (the paper's Figure 2).
//
// The loop receives a burst of packets from a nic.Dataplane, classifies the
// burst in one call (a Classifier: the native psp-header classifier or a Wasm
// host), enqueues each request on its typed queue in a darc.Policy, collects
// completion messages from the workers, asks the policy which request goes to
// which idle worker and pushes each request to that worker over a lock-free
// single-producer single-consumer ring. A worker runs the application (a
// Handler) on the request's buffer, which it rewrites in place into the
// response, transmits the response on its own TX queue and sends a completion
// (worker, type, start and end timestamps) back on its own ring, so the policy
// profiles real service times.
//
// # Concurrency
//
// Run owns the policy: only the dispatcher goroutine (locked to its own OS
// thread, optionally pinned to a CPU) calls it. Each worker is one goroutine
// locked to its own OS thread (optionally pinned). Stats may be called from any
// goroutine: it returns the latest snapshot that the dispatcher goroutine
// publishes every Spec.StatsInterval through an atomic pointer, so status pages
// never touch the policy.
//
// # Ownership
//
// The caller opens the dataplane and closes it after Run returns; the
// dispatcher never closes it. Every buffer the dispatcher receives is either
// transmitted by a worker or released to the dataplane, and every accepted
// request is accounted for: Received = Answered + Dropped (by reason) +
// InFlight.
//
// # Shutdown
//
// When Run's context is cancelled the loop stops receiving, keeps dispatching
// until the typed queues and the workers are empty (answering every request
// already accepted) or Spec.DrainTimeout has passed, stops the workers, and
// counts whatever was still queued as dropped for reason "shutdown".
package dispatcher
