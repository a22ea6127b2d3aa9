package darc

import "slices"

// Serving in place: the drivers' shared rule.
//
// A driver may run a request on the thread that dispatches it instead of
// handing it to the worker the policy chose, when that worker's thread is
// asleep and the request is expected to take less than waking it would
// (the runtime dispatcher's Spec.InPlaceLimit; the simulator models the
// same). The policy's semantics do not change: the request still runs as
// the chosen worker, which the policy sees busy for its service. The rule
// that says which requests are short enough lives here, so that the
// runtime and the simulator decide alike.

// ServiceEstimateSamples is how many services of a type a ServiceEstimate
// measures before it gives an estimate.
const ServiceEstimateSamples = 4

// serviceEstimateShift sets how fast an estimate follows: each service
// moves it 1/2^serviceEstimateShift of its value towards itself.
const serviceEstimateShift = 4

// ServiceEstimate is a running estimate of the median service time of one
// request type: it starts at the median of the first
// ServiceEstimateSamples services, then moves by a fixed fraction of itself
// towards each new one. A service stretched by a descheduled thread
// (hundreds of microseconds on a shared VM) moves it no more than any
// other service above it, while a type whose services really change is
// followed within tens of requests. The zero value is ready; it allocates
// nothing.
type ServiceEstimate struct {
	ns    int64
	n     uint32
	first [ServiceEstimateSamples]int64
}

// Add folds one measured service (ns) into the estimate.
func (e *ServiceEstimate) Add(service int64) {
	if e.n < ServiceEstimateSamples {
		e.first[e.n] = service
		e.n++
		if e.n == ServiceEstimateSamples {
			f := e.first
			slices.Sort(f[:])
			e.ns = (f[ServiceEstimateSamples/2-1] + f[ServiceEstimateSamples/2]) / 2
		}
		return
	}
	step := max(e.ns>>serviceEstimateShift, 1)
	switch {
	case service > e.ns:
		e.ns += min(step, service-e.ns)
	case service < e.ns:
		e.ns -= min(step, e.ns-service)
	}
}

// Ready reports whether enough services were measured for an estimate.
func (e *ServiceEstimate) Ready() bool { return e.n >= ServiceEstimateSamples }

// Ns returns the estimate (ns; 0 before Ready).
func (e *ServiceEstimate) Ns() int64 { return e.ns }
