package main

// Group is a set of benchmarks run by one go test command, with one
// section of BENCHMARKS.md.
type Group struct {
	ID        string // the section's key (-only)
	Title     string // what the benchmarks measure
	Package   string
	Bench     string // -bench pattern
	Benchtime string // -benchtime; "" for go test's default
}

// groups are the benchmarks BENCHMARKS.md holds: those the docs quote,
// that run without root, hardware or external tools, each short enough for
// the whole run to take minutes. Add a benchmark here to give its figure
// an owner.
var groups = []Group{
	{ID: "dispatcher", Title: "The dispatcher on one core, in-memory dataplane: classify, queue, DARC, rings (DispatcherStep); recording a request's stage times (StageRecord)",
		Package: "./dispatcher", Bench: "DispatcherStep|StageRecord", Benchtime: "200ms"},
	{ID: "darc", Title: "The policy: enqueue, dispatch, complete (Cycle, Burst), profile and reservation updates, dispatch with many types",
		Package: "./darc", Bench: "Cycle|Burst|Complete|DispatchEmpty|ReservationUpdate|ManyTypes", Benchtime: "100ms"},
	{ID: "ring", Title: "The SPSC ring against xsync's SPSC queue",
		Package: "./internal/ring", Bench: "SPSC", Benchtime: "100ms"},
	{ID: "bufpool", Title: "The packet buffer pool (a LIFO stack) against a queue",
		Package: "./nic/internal/bufpool", Bench: ".", Benchtime: "100ms"},
	{ID: "memnic", Title: "The in-memory dataplane's generator and injector",
		Package: "./nic/memnic", Bench: ".", Benchtime: "100ms"},
	{ID: "classifiers", Title: "The example Wasm classifiers, batches of 32 (fuel included), and the RESP parser in native Go",
		Package: "./examples/classifiers", Bench: "ClassifyBatch|RESPNative", Benchtime: "100ms"},
	{ID: "fuel", Title: "Fuel instrumentation's overhead, fastest rounds of interleaved instances",
		Package: "./wasmclass", Bench: "FuelRatio", Benchtime: "200ms"},
	{ID: "memcached", Title: "The memcached application, per request, replies framed; the overloaded reply's decision",
		Package: "./app/memcached", Bench: "Get$|MultiGet100|Set$|ReplyOverloaded", Benchtime: "100ms"},
	{ID: "sim", Title: "The simulator: one second of extreme-bimodal at 5 Mrps on 16 workers",
		Package: "./sim", Bench: "Simulate5Mrps", Benchtime: "1x"},
	{ID: "record", Title: "Recording a latency sample; a workload draw; the load generator's reply handling",
		Package: "./report ./workload ./loadgen", Bench: "Record|Sampler|HandleReply", Benchtime: "100ms"},
}
