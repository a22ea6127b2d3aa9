// Package workload describes request mixes, the one workload format shared by
// the simulator (psp sim) and the load generator (psp client).
//
// A Workload is a list of request types, each with a wire type id (the type
// field of the psp header, see package wire), a share of the requests and a
// service-time distribution. The paper's four workloads, and one for the
// memcached application, are built in:
//
//	high-bimodal     SHORT 1us 50%, LONG 100us 50%
//	extreme-bimodal  SHORT 0.5us 99.5%, LONG 500us 0.5%
//	tpcc             Payment 5.7us 44%, OrderStatus 6us 4%, NewOrder 20us 44%,
//	                 Delivery 88us 4%, StockLevel 100us 4%
//	rocksdb          GET 1.5us 50%, SCAN 635us 50%
//	memcached        GET 2us 90%, MULTIGET (100 keys) 101us 5%, SET 2us 5%
//	                 (for psp client --format memcached)
//
// Others are read from a YAML (.yaml, .yml) or JSON (.json) file with Load,
// or by Parse, which accepts a built-in name or a path:
//
//	name: kv-mix
//	types:
//	  - name: GET
//	    id: 10
//	    share: 0.9
//	    service: {kind: exponential, mean: 2us}
//	  - name: SCAN
//	    id: 11
//	    share: 0.1
//	    service: {kind: lognormal, mean: 200us, p99: 1ms}
//
// Distributions (durations are Go duration strings: "500ns", "1.5us", "2ms"):
//
//	kind: fixed        value: D                   always D
//	kind: exponential  mean: D                    exponential with mean D
//	kind: lognormal    mean: D, sigma: S          lognormal with mean D and shape S
//	kind: lognormal    mean: D, p99: P            lognormal with mean D and 99th percentile P
//	kind: bimodal      low: A, high: B, p_high: P A with probability 1-P, else B
//
// Decoding is strict: an unknown field is an error naming the field and the
// file. Shares must be positive; when they do not sum to 1 (within 1e-6) they
// are normalised (divided by their sum), so "share: 3" and "share: 1" mean a
// 3:1 mix (a sum that overflows, or a share that normalises to 0, is an
// error). Type names and ids must be unique and ids must not be 0 (UNKNOWN);
// names (the workload's, its types' and phases') are at most MaxNameLen
// bytes of printable characters. A lognormal's sigma is at most MaxSigma
// and its median at least 1 ns; NaN and infinite numbers are refused.
// Sampled service times are at least 1 ns.
//
// # Sampling
//
// Workload.NewSampler returns a Sampler that draws (type index, service time)
// pairs; NewArrivals returns a Poisson arrival process. Both are
// deterministic for a given seed, allocate nothing per draw and are not safe
// for concurrent use: give each goroutine its own. The load a rate offers to
// n workers is rate x MeanService / n (see RateForLoad).
//
// A Workload is plain data: copy it freely; nothing needs closing.
package workload
