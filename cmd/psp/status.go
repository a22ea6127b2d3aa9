package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/persephone-go/psp/harness"
	"github.com/persephone-go/psp/internal/affinity"
	"github.com/persephone-go/psp/server"
)

// statusCommand is `psp status`: print a running server's /status.
func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show a running server's reservation, per-type profile, queues and drops",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "admin", Value: server.DefaultAdmin, Usage: "the server's admin `ADDR` (host:port or URL)"},
			jsonFlag(),
			&cli.DurationFlag{Name: "timeout", Value: harness.DefaultAdminTimeout, Usage: "HTTP timeout"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("status: unexpected argument %q (flags only; see psp status --help)", c.Args().First())
			}
			if err := refuseZero(c, "admin", "timeout"); err != nil {
				return fmt.Errorf("status: %w", err)
			}
			if c.Duration("timeout") < 0 {
				return fmt.Errorf("status: --timeout %v: want > 0", c.Duration("timeout"))
			}
			admin, err := harness.NewAdminClient(c.String("admin"), c.Duration("timeout"))
			if err != nil {
				return fmt.Errorf("status: --admin: %w", err)
			}
			if c.Bool("json") {
				body, err := admin.StatusJSON(c.Context)
				if err != nil {
					return err
				}
				_, err = c.App.Writer.Write(body)
				return err
			}
			st, err := admin.Status(c.Context)
			if err != nil {
				return err
			}
			return printStatus(c.App.Writer, st)
		},
	}
}

// printStatus renders st for humans.
func printStatus(w io.Writer, st *server.Status) error {
	state := "running"
	switch {
	case st.Draining:
		state = "draining"
	case !st.Running:
		state = "stopped"
	}
	app := st.App
	if st.Dilation != 0 {
		app += fmt.Sprintf(" (dilation %g)", st.Dilation)
	}
	fmt.Fprintf(w, "psp %s on %s (%s): policy %s, phase %s, %d workers, app %s, up %.1fs\n",
		state, st.Listen, st.Dataplane, st.Policy, st.Phase, st.Workers, app, st.UptimeSeconds)
	fmt.Fprintf(w, "requests: received %d, answered %d, dropped %d, in flight %d (queued %d, running %d)\n",
		st.Received, st.Answered, st.Dropped, st.InFlight, st.Queued, st.Busy)
	if st.Dropped > 0 {
		d := st.Drops
		var parts []string
		for _, p := range []struct {
			name string
			n    uint64
		}{{"runt", d.Runt}, {"truncated", d.Truncated}, {"queue full", d.QueueFull}, {"overload", d.Overload},
			{"app", d.App}, {"panic", d.Panic}, {"tx error", d.TxError}, {"shutdown", d.Shutdown}} {
			if p.n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", p.name, p.n))
			}
		}
		fmt.Fprintf(w, "drops: %s\n", strings.Join(parts, ", "))
	}
	n := st.Net
	fmt.Fprintf(w, "dataplane: received %d packets, sent %d; dropped on receive %d, truncated %d, transmit errors %d\n",
		n.RxPackets, n.TxPackets, n.RxDropped, n.RxTruncated, n.TxErrors)
	fmt.Fprintf(w, "idle workers %.2f, CPU waste %.2f workers (whole run %.2f)\n", st.IdleWorkers, st.CPUWaste, st.CPUWasteTotal)

	fmt.Fprintf(w, "\nreservation (computed %d times):\n", st.Reservations)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(st.Groups) == 0 {
		fmt.Fprintln(tw, "  (none: no reservation yet)")
	}
	for i, g := range st.Groups {
		spill := ""
		if g.Spillway {
			spill = " + spillway"
		}
		fmt.Fprintf(tw, "  group %d\t%s\tdemand %.2f\treserved [%s]%s\tsteals [%s]\n", i, strings.Join(g.Types, ","), g.Demand,
			affinity.FormatList(g.Reserved), spill, affinity.FormatList(g.Stealable))
	}
	tw.Flush()

	fmt.Fprintln(w, "\ntypes (profile: the policy's current window; measured: every answered request since start):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ID\tNAME\tPROFILED MEAN\tSHARE\tQUEUED\tRECEIVED\tANSWERED\tDROPPED\tMEASURED MEAN\tMEAN QUEUEING\t")
	for _, t := range st.Types {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.3f\t%d\t%d\t%d\t%d\t%s\t%s\t\n", t.ID, t.Name, ns(t.ProfiledMeanServiceNs), t.ProfiledShare,
			t.Queued, t.Received, t.Answered, t.Dropped, ns(t.MeasuredMeanServiceNs), ns(t.MeanQueueingNs))
	}
	tw.Flush()

	printStages(w, st)

	fmt.Fprintln(w, "\nclassifiers:")
	for _, t := range st.Tenants {
		kind := "wasm"
		if t.Native {
			kind = "native psp header"
		}
		ports := "default"
		if len(t.Ports) > 0 {
			ports = fmt.Sprintf("ports %v", t.Ports)
		}
		fmt.Fprintf(w, "  %s: %s, version %d, %s, %d types", t.Name, kind, t.Version, ports, len(t.Types))
		var faults uint64
		for _, v := range t.Faults {
			faults += v
		}
		if faults > 0 {
			fmt.Fprintf(w, ", faults %v", t.Faults)
		}
		if t.BreakerOpen {
			fmt.Fprint(w, ", BREAKER OPEN")
		}
		fmt.Fprintln(w)
	}
	return nil
}

// printStages shows where each type's requests spent their time in the
// server, and the Go runtime's scheduling latency.
func printStages(w io.Writer, st *server.Status) {
	fmt.Fprintln(w, "\nwhere the time went, per stage since start (mean / p99; p99 is a bucket's upper bound, <=26% high):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "NAME\tRAN\t")
	for _, s := range server.StageNames() {
		fmt.Fprintf(tw, "%s\t", strings.ToUpper(s))
	}
	fmt.Fprintln(tw)
	rows := 0
	for _, t := range st.Types {
		if t.Stages == nil {
			continue
		}
		rows++
		fmt.Fprintf(tw, "%s\t%d\t", t.Name, t.Stages.Service.Count)
		for _, s := range server.StageNames() {
			l := t.Stages.ByName(s)
			fmt.Fprintf(tw, "%s / %s\t", ns(l.MeanNs), quantileNs(l.P99Ns, l.Count))
		}
		fmt.Fprintln(tw)
	}
	if rows == 0 {
		fmt.Fprintln(tw, "(no request ran yet)\t\t")
	}
	tw.Flush()
	r := st.Runtime.SchedLatency
	fmt.Fprintf(w, "Go runtime: GOMAXPROCS %d; goroutines waited for a processor %d times, p50 %s, p99 %s, p99.9 %s\n",
		st.Runtime.GOMAXPROCS, r.Count, quantileNs(r.P50Ns, r.Count), quantileNs(r.P99Ns, r.Count), quantileNs(r.P999Ns, r.Count))
}

// quantileNs formats a quantile of a histogram with count samples (-1: above
// the last bucket).
func quantileNs(v int64, count uint64) string {
	switch {
	case count == 0:
		return "-"
	case v < 0:
		return "over 100s"
	case v == 0:
		return "0"
	}
	return time.Duration(v).String()
}

// ns formats nanoseconds as a duration.
func ns(v float64) string {
	if v == 0 {
		return "-"
	}
	return time.Duration(v).Round(10 * time.Nanosecond).String()
}
