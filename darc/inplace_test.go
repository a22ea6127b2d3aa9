package darc

import "testing"

// TestServiceEstimateIsRobust: the estimate follows the median, so that
// rare stretched services (a descheduled thread) do not move it far, while
// a type that becomes long is followed.
func TestServiceEstimateIsRobust(t *testing.T) {
	var e ServiceEstimate
	for i := 0; i < 3; i++ {
		e.Add(2000)
	}
	if e.Ready() {
		t.Fatalf("ready after 3 services, want %d", ServiceEstimateSamples)
	}
	for i := 0; i < 400; i++ {
		s := int64(2000)
		if i%10 == 9 {
			s = 500_000 // one in ten stretched 250x
		}
		e.Add(s)
	}
	if !e.Ready() || e.Ns() > 4000 {
		t.Errorf("estimate %dns after 2µs services with 10%% stretched to 500µs, want about 2µs", e.Ns())
	}
	for i := 0; i < 200; i++ {
		e.Add(400_000)
	}
	if e.Ns() < 300_000 {
		t.Errorf("estimate %dns after 200 services of 400µs, want about 400µs", e.Ns())
	}
	var first ServiceEstimate
	for _, s := range []int64{900_000, 1000, 1200, 800_000} { // a cold first request
		first.Add(s)
	}
	if got := first.Ns(); got < 1000 || got > 800_000 {
		t.Errorf("estimate from the first four %d, want their median", got)
	}
}

func TestServiceEstimateNoAlloc(t *testing.T) {
	var e ServiceEstimate
	if n := testing.AllocsPerRun(1000, func() { e.Add(1234) }); n != 0 {
		t.Errorf("Add allocates %.1f times", n)
	}
}
