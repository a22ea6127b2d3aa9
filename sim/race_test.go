//go:build race

package sim

// raceEnabled: the race detector slows the simulator about tenfold; the
// longest tests simulate less under it (the engines run on one goroutine;
// RunSweep and RunAll are what it checks).
const raceEnabled = true
