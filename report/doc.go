// Package report holds the results shared by the simulator (psp sim), the
// load generator (psp client, psp sweep) and psp plot: one format for
// simulated and measured load points.
//
// A Point is one run at one offered load under one policy: per-type and
// overall latency and slowdown quantiles, offered and achieved throughput,
// mean idle workers, drops and whether the load was sustained. Points are
// recorded with a Recorder, summarised with Summarize (per policy: the
// highest load at which a p99.9 slowdown SLO holds), printed with WriteTable
// and WriteSummary, saved with WriteJSON or WriteCSV, read back with
// ReadJSON, ReadCSV or ReadFile, and drawn with PlotSlowdown and
// PlotLatency. Points carry a Source ("sim", "measured", ...), so curves of
// different sources can share a chart: lines are labelled "policy (source)"
// when more than one source is present.
//
// Slowdown is latency (time from arrival to completion) divided by the
// request's service time. Quantiles follow the nearest-rank definition
// (p99.9 of n samples is the ceil(0.999 n)-th smallest, so under 1000
// samples it is the maximum), to the histograms' 3 significant digits.
//
// # Concurrency
//
// A Recorder is not safe for concurrent use: one goroutine records, or each
// goroutine records into its own Recorder and they are merged with Merge.
// The writers, readers and plot functions keep no state. Nothing here needs
// closing; writers do not close the io.Writer they are given.
package report
