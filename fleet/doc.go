// Package fleet rolls a classifier out to a fleet of psp servers through
// their admin endpoints, wave by wave, with canary analysis and automatic
// rollback.
//
// A rollout (Run) swaps the first wave (the canaries) with compare-and-swap
// on the module each server ran, lets it run for the bake period, and
// judges each canary against a baseline from what the servers already
// measure: classifier faults per request, the share of requests
// classified UNKNOWN, drops for errors per request (from GET /status, the
// counters' growth over the bake), and each type's p99.9 latency over the
// bake (from the psp_request_latency_seconds histograms of GET /metrics,
// their buckets' growth). The baseline is the servers still on the old
// module over the same window (its p99.9 the highest of theirs); for a
// last wave, the servers that passed on the new module in earlier waves,
// same window; for a plan of one wave, each server's own window on the
// old module, observed first. A server worse than
// the baseline by more than Bounds, or with too few requests to judge,
// fails its wave: the rollout stops and every server it swapped is rolled
// back, each only if it still runs the module rolled out.
//
// Run is not safe for concurrent use on the same servers: that is what its
// compare-and-swap guards against (the second rollout is refused, 409).
package fleet
