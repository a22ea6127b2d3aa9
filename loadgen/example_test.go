package loadgen_test

import (
	"context"
	"fmt"
	"time"

	"github.com/persephone-go/psp/loadgen"
	"github.com/persephone-go/psp/workload"
)

// A schedule is drawn once, from a workload, a rate and a seed.
func ExampleNewSchedule() {
	w, err := workload.Builtin("high-bimodal")
	if err != nil {
		panic(err)
	}
	// 80% of 14 workers emulated at a dilation of 1000 (1µs -> 1ms).
	rate := loadgen.RateForLoad(&w, 0.8, 14, 1000)
	sched, err := loadgen.NewSchedule(&w, rate, 5*time.Second, 1)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%.1f req/s, types %s and %s\n", sched.Rate, sched.Types[0].Name, sched.Types[1].Name)
	// Output: 221.8 req/s, types SHORT and LONG
}

// Run plays a schedule against a server (here psp serve --app emulate
// --dilation 1000) and measures latencies from the intended send times.
func ExampleRun() {
	w, err := workload.Builtin("high-bimodal")
	if err != nil {
		panic(err)
	}
	sched, err := loadgen.NewSchedule(&w, loadgen.RateForLoad(&w, 0.8, 14, 1000), 5*time.Second, 1)
	if err != nil {
		panic(err)
	}
	res, err := loadgen.Run(context.Background(), loadgen.Spec{Server: "127.0.0.1:6789", Dilation: 1000}, sched)
	if err != nil {
		panic(err)
	}
	if !res.Sustained {
		fmt.Println("not sustained:", res.NotSustainedReason())
	}
	for _, t := range res.Types {
		fmt.Printf("%s: p99.9 slowdown %.3g\n", t.Name, t.P999Slowdown)
	}
}
