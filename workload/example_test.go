package workload_test

import (
	"fmt"

	"github.com/persephone-go/psp/workload"
)

func ExampleBuiltin() {
	w, err := workload.Builtin("extreme-bimodal")
	if err != nil {
		panic(err)
	}
	fmt.Println(w.String())
	fmt.Printf("mean %.1f ns; 80%% load on 16 workers = %.0f req/s\n", w.MeanService(), w.RateForLoad(0.8, 16))
	// Output:
	// extreme-bimodal: SHORT 99.5% fixed 500ns, LONG 0.5% fixed 500µs
	// mean 2997.5 ns; 80% load on 16 workers = 4270225 req/s
}
