// Package server assembles psp's live server from a Config: the dataplane
// (UDP sockets, DPDK or in memory), the classifier (the native psp-header
// classifier or Wasm tenants in a wasmclass.Host), the policy (package darc),
// the application (package app/...), the dispatcher, and the admin HTTP
// endpoint (GET /status, GET /metrics, PUT /tenants/{name}/classifier).
//
// # Lifecycle
//
// New opens everything (and fails with a clear error when something cannot
// be opened: a port in use, a bad classifier file, a CPU the machine lacks).
// Run serves until its context is cancelled, then shuts down gracefully: the
// dispatcher drains (see package dispatcher), the admin endpoint stops, and
// Run closes the dataplane, the classifier host and the application. A Server
// runs once. Status, Handler and Swap are safe for concurrent use.
package server
