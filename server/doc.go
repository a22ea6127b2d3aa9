// Package server assembles psp's live server from a Config: the dataplane
// (UDP sockets, DPDK or in memory), the classifier (a native classifier or
// Wasm tenants in a wasmclass.Host), the policy (package darc), the
// application, the dispatcher, and the admin HTTP endpoint (GET /status,
// GET /metrics, the tenants' classifiers and lifecycle: see Handler).
//
// # Serving your own service
//
// The application is an Application: a handler that each worker runs on
// each request (it reads the request in the packet buffer and writes the
// reply in place; an app.MultiHandler may answer with several
// datagrams), an optional native classifier with its type names, the
// shortest request it accepts and an optional Close. psp serve's built-in
// applications (Config.App.Name: emulate, spin, tpcc, kv, memcached) are
// built as Applications from the configuration; a program passes its own in
// Options.Application and gets the same server: UDP or DPDK dataplane, its
// Wasm classifier (Config.Classifier, or Config.Tenants with the module as
// a file or as bytes in Tenant.Wasm, for a program that embeds it), DARC
// and the admin endpoint:
//
//	mine := &server.Application{Name: "mine", Handler: app.HandlerFunc(handle)}
//	srv, err := server.New(ctx, server.Config{Listen: ":7000", Workers: 8, Classifier: "mine.wasm"},
//		server.Options{Application: mine})
//	...
//	err = srv.Run(ctx)
//
// examples/service is a complete program.
//
// # Overload
//
// New opens the dataplane before the policy and gives the policy what the
// dataplane can lend to requests (nic.BufferPool: the UDP dataplane's 8192
// buffers less its receive batch) as its pool: half divided into per-type
// guarantees, half shared, per-type queue deadlines on top
// (Config.DeadlineFactor, DeadlineFloor and Types; see package darc). An
// explicit queue_capacity that cannot fit the pool is refused. The
// dataplane gets one TX queue more than the workers: the dispatcher's own,
// for "overloaded" replies. GET /status and GET /metrics show every drop by
// reason, per type too, the budgets, deadlines and longest waits, and
// whether the server is shedding.
//
// # Tenants
//
// A server is the set of its tenants: Config.Tenants, or one default
// tenant of Config.Classifier (or of the native classifier) owning every
// port. Every tenant has its ports (the dataplane receives on them), its
// classifier (a wasmclass Host of its own, or the application's native
// classifier), its own range of types, its classifier's limits
// (ClassifierOptions) and its token. Under policy darc or darc-static it
// also has its own DARC within its share of the workers and of the buffer
// pool (darc.Tenants), and AddTenant, UpdateTenant and RemoveTenant change
// the tenants while Run runs (POST, PATCH, DELETE /tenants over HTTP with
// the operator's token), whether the server started with one classifier
// or many; under the other policies the tenants share one policy
// (darc.Shared) and are fixed at start (ErrFixedTenants). Swap and
// Rollback change a tenant's classifier (its own token or the
// operator's). Tokens are kept as SHA-256 digests, one principal each;
// every change is a JSON line in the audit log (Admin.AuditLog), every
// refusal in the refusals' log beside it (refused credentials counted per
// source and interval).
//
// # Lifecycle
//
// New opens everything (and fails with a clear error when something cannot
// be opened: a port in use, a bad classifier file, a CPU the machine lacks).
// Run serves until its context is cancelled, then shuts down gracefully: the
// dispatcher drains (see package dispatcher), the admin endpoint stops, and
// Run closes the dataplane, the classifier host and the application (a
// caller's Application too, through its Close, once New has succeeded).
// Run returns within Config.DrainTimeout plus about half a second whatever
// the handlers do: when the drain abandons a handler that still runs, the
// application is left open (the process exits anyway). A Server runs once.
// Status, Handler and Swap are safe for concurrent use.
package server
