// Package app is the contract between psp and the applications it serves:
// the request type a classifier gives a request, the interfaces a
// classifier and an application implement, and the reply an application
// writes. The scheduler (darc, dispatcher) and the classifier host
// (wasmclass) speak it; an application imports it and never the scheduler.
//
// The built-in applications are its sub-packages: spin, emulate, tpcc, kv
// and memcached.
package app
