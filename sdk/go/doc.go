// Package psp lets a Go program be a psp request classifier (ABI v1, see
// sdk/ABI.md): write one function from a payload to a request type, register
// it from an init function, and build the main package as a WASI reactor.
//
//	package main
//
//	import psp "github.com/persephone-go/psp/sdk/go"
//
//	func classify(payload []byte, wirelen uint32) uint32 {
//		if len(payload) < 16 {
//			return 0 // UNKNOWN
//		}
//		return uint32(payload[4]) % 3
//	}
//
//	func init() { psp.Register(classify, "UNKNOWN", "SHORT", "LONG") }
//
//	func main() {}
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o classifier.wasm .
//
// The host calls the module's _initialize export once, at load, which
// runs the package init functions (and so Register) but not main; main must
// exist and is never called.
//
// # Concurrency
//
// A classifier instance is single-threaded: the host calls one export at a
// time. The classifier function must not keep state that changes its
// answers between packets, and must not retain the payload slice: it aliases
// the I/O buffer, which the host overwrites before the next call.
//
// # Costs and limits
//
// A Go module is about 2 MB, needs WASI and at least 38 memory pages (the
// host's default limit is 64), takes about a second to compile when loaded,
// and costs about 2.5 times a C classifier per packet in batches. A panic
// ends the instance (the host counts a trap and re-creates it). The
// classifier should not allocate: every allocation may run the garbage
// collector inside a classify call.
//
// The exports exist only under GOOS=wasip1. Elsewhere the package holds
// Register and the constants alone, so that the module's packages build and
// vet everywhere and a classifier function can have ordinary unit tests.
package psp
