// Package harness runs experiments on psp: it starts servers (as child
// processes or in this process), plays open-loop load at them with package
// loadgen, sweeps policies and loads, simulates the same setup with package
// sim, reads a running server's state over its admin endpoint (package
// admin) and writes results and charts with package report.
//
// cmd/psp is a thin layer of flags and printing over this package; tests
// and other programs call it directly:
//
//	sw := &harness.Sweep{
//		Plan:     harness.Plan{Workload: w, Workers: 14, Duration: 5 * time.Second},
//		Policies: []string{"darc", "cfcfs"},
//		Loads:    []float64{0.5, 0.8},
//		Server:   harness.ServerSpec{App: "emulate"},
//		Launcher: harness.InProcess{},
//		Out:      dir,
//	}
//	res, err := sw.Run(ctx)
//
// # Pieces
//
//   - ParseLoads and ParsePolicies: the one syntax for load ranges and
//     policy lists.
//   - Plan: one load-generator run (workload, rate or load, duration, seed).
//   - Launcher (Exec, InProcess) and ServerSpec: psp servers to measure.
//   - Sweep: every policy at every load, points of a fixed length or long
//     enough for Samples requests of the shortest type, with optional
//     simulation; Demo builds the sweep psp demo runs.
//   - CompareTails: whether a live server shows its policy. With Simulate,
//     a sweep replays each measured point in the simulator (the requests
//     the load generator actually sent, at the times it sent them,
//     undilated: sim.Config.Trace) and compares the shortest type's p99 and
//     p99.9 slowdowns with the replay's plus the server's overhead: its
//     distribution, measured with the shortest type alone at a load where
//     nothing queues (OverheadDist), during each point on a twin server
//     (CalibrateAlongside) or once before the points (Calibrate); else a
//     constant, the live median minus the replayed one at the policy's
//     lowest load. Within DefaultTailBound either way of the range a
//     sample of the live tail's size would show (Problem), the live tail
//     is the policy's, not the host's; Contrasts, the other policy's
//     replay of the same requests, show the comparison tells policies
//     apart. A run over TCP is replayed on its connections (replies in
//     order per connection; each request pays its own overhead before
//     its reply waits: ConnSlowdownQuantile), and also without them
//     (WithoutConns). tests/TestLiveTailsMatchSimulator and
//     TestLiveTCPTailsMatchSimulator check it.
//   - WriteCharts, WriteTimelines: the charts of a set of points.
//   - Experiments: the paper's figures and tables (psp experiment NAME),
//     each a simulation of the paper's testbed (TestbedRTT,
//     TestbedDispatcherRate) over seeds, or a time-dilated live run with
//     the simulator at the same scale; Experiment.Run prints nothing and
//     returns an ExperimentResult (tables with the spread over seeds, a
//     one-line summary, the points) after writing its files and charts.
//
// # Concurrency
//
// A Sweep or Plan runs on the calling goroutine (the load generator starts
// its own).
package harness
