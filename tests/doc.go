// Package tests holds psp's end-to-end tests: a real psp serve process (the
// binary, built once per test run) on UDP loopback with the emulate
// application, driven by the open-loop load generator of package loadgen.
// They check the paper's claims on a live server: DARC's short-request tail
// against c-FCFS, re-reservation after a phase change, a useless classifier,
// hot swaps without loss, robustness to killed clients, garbage and a
// flooded request type, and overload (overload_test.go): a flood of
// well-formed requests of unused types, five times the capacity of LONG for
// ten seconds, the accounting after both, and a drain that is a bound; the
// memcached application's "overloaded" replies to what it sheds, as psp
// client counts them (memcached_overload_test.go).
//
// The emulate application sleeps each request's service time multiplied by
// a dilation factor, so 14 emulated workers show realistic queueing on a
// 2-core machine; every test runs for a few seconds. Servers are stopped
// with SIGTERM when a test ends.
package tests
