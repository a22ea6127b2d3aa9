package sim_test

import (
	"fmt"
	"time"

	"github.com/persephone-go/psp/sim"
	"github.com/persephone-go/psp/workload"
)

// An M/D/1 queue at 70% load: the mean wait approaches the
// Pollaczek-Khinchine value rho*D/(2(1-rho)) = 1167 ns.
func ExampleRun() {
	w := workload.Workload{Name: "fixed-1us", Types: []workload.TypeSpec{
		{Name: "A", ID: 1, Share: 1, Service: workload.Dist{Kind: workload.Fixed, Value: workload.Duration(time.Microsecond)}},
	}}
	p, err := sim.Run(sim.Config{Workload: w, Workers: 1, Policy: "cfcfs", Load: 0.7, Duration: 200 * time.Millisecond, Seed: 1})
	if err != nil {
		panic(err)
	}
	fmt.Printf("sustained %v, mean wait within 5%% of 1167 ns: %v\n",
		p.Sustained, p.Overall.MeanLatency-1000 > 1167*0.95 && p.Overall.MeanLatency-1000 < 1167*1.05)
	// Output:
	// sustained true, mean wait within 5% of 1167 ns: true
}
