package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/persephone-go/psp/admin"
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
			&cli.DurationFlag{Name: "timeout", Value: admin.DefaultTimeout, Usage: "HTTP timeout"},
			readTokenFlag(),
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
			ac, err := admin.NewClient(c.String("admin"), c.Duration("timeout"))
			if err != nil {
				return fmt.Errorf("status: --admin: %w", err)
			}
			if err := setReadToken(c, ac, "status"); err != nil {
				return err
			}
			if c.Bool("json") {
				body, err := ac.StatusJSON(c.Context)
				if err != nil {
					return err
				}
				_, err = c.App.Writer.Write(body)
				return err
			}
			st, err := ac.Status(c.Context)
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
	workers := fmt.Sprintf("%d workers", st.Workers)
	if st.WorkersAuto {
		workers += " (auto)"
	}
	fmt.Fprintf(w, "psp %s on %s (%s): policy %s, phase %s, %s, app %s, up %.1fs\n",
		state, st.Listen, dataplaneLabel(st.Dataplane, st.Listen), st.Policy, st.Phase, workers, app, st.UptimeSeconds)
	if st.Overloaded {
		fmt.Fprintf(w, "OVERLOADED: shedding %.0f requests/s over the last second%s\n", st.ShedRate, shedByType(st))
	}
	parked := ""
	if st.Parked > 0 {
		parked = fmt.Sprintf(", parked %d", st.Parked)
	}
	fmt.Fprintf(w, "requests: received %d = answered %d + dropped %d + in flight %d (queued %d, running %d%s)\n",
		st.Received, st.Answered, st.Dropped, st.InFlight, st.Queued, st.Busy, parked)
	if st.Dropped > 0 {
		fmt.Fprintf(w, "drops: %s", st.Drops.String())
		if st.OverloadReplies > 0 {
			fmt.Fprintf(w, "; %d answered \"overloaded\"", st.OverloadReplies)
		}
		fmt.Fprintln(w)
	}
	n := st.Net
	fmt.Fprintf(w, "dataplane: received %d packets, sent %d; dropped on receive %d (kernel socket or device full, or not requests), truncated %d, transmit errors %d",
		n.RxPackets, n.TxPackets, n.RxDropped, n.RxTruncated, n.TxErrors)
	if n.RxNoBuffer > 0 {
		fmt.Fprintf(w, ", out of buffers %d times", n.RxNoBuffer)
	}
	fmt.Fprintln(w)
	if kernelDrops(st) > 0 {
		fmt.Fprintf(w, "kernel drops at the receive sockets (the server did not read fast enough: a stall, or a socket buffer too small for the bursts):")
		for i, p := range st.KernelDrops {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(w, "%s port %d: %d", sep, p.Port, p.Drops)
		}
		fmt.Fprintln(w)
	}
	if t := st.TCP; t != nil {
		fmt.Fprintf(w, "tcp: %d connections open (at most %d), %d accepted, %d refused over the limit, %d accept errors retried; in %d bytes, out %d; memory %d bytes\n",
			t.Current, t.Max, t.Accepted, t.Rejected, t.AcceptErrors, t.BytesIn, t.BytesOut, t.MemoryUsed)
		var closed []string
		t.Closed.Each(func(reason string, n uint64) {
			if n > 0 {
				closed = append(closed, fmt.Sprintf("%s %d", reason, n))
			}
		})
		if len(closed) > 0 {
			fmt.Fprintf(w, "tcp closed: %s\n", strings.Join(closed, ", "))
		}
		if t.PipelinePauses+t.MemoryPauses+t.RepliesDropped+t.RequestsDropped > 0 {
			fmt.Fprintf(w, "tcp bounds: %d pipeline pauses, %d memory pauses; %d replies and %d requests of closed connections dropped\n",
				t.PipelinePauses, t.MemoryPauses, t.RepliesDropped, t.RequestsDropped)
		}
		if t.Pushes+t.PushesRefused > 0 {
			fmt.Fprintf(w, "tcp pushes: %d sent unasked (pub/sub messages), %d refused (connection closed or at its output bound)\n",
				t.Pushes, t.PushesRefused)
		}
	}
	if len(st.AppCounters) > 0 {
		fmt.Fprintf(w, "app %s:", st.App)
		for i, c := range st.AppCounters {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(w, "%s %s %g", sep, strings.TrimSuffix(strings.TrimPrefix(c.Name, st.App+"_"), "_total"), c.Value)
		}
		fmt.Fprintln(w)
	}
	if st.Pool > 0 {
		fmt.Fprintf(w, "buffer pool: %d requests, %d guaranteed to types, %d shared (%d borrowed now)\n",
			st.Pool, st.Pool-st.Shared, st.Shared, st.Borrowed)
	}
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
	fmt.Fprintln(tw, "ID\tNAME\tPROFILED MEAN\tSHARE\tQUEUED\tHELD/BUDGET\tDEADLINE\tMAX WAIT\tRECEIVED\tANSWERED\tDROPPED\tMEASURED MEAN\tMEAN QUEUEING\t")
	var dropped []string
	for _, t := range st.Types {
		budget := "-"
		if t.Budget > 0 {
			budget = fmt.Sprintf("%d/%d", t.Held, t.Budget)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.3f\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t\n", t.ID, t.Name, ns(t.ProfiledMeanServiceNs), t.ProfiledShare,
			t.Queued, budget, ns(float64(t.DeadlineNs)), ns(float64(t.MaxWaitNs)), t.Received, t.Answered, t.Dropped, ns(t.MeasuredMeanServiceNs), ns(t.MeanQueueingNs))
		if t.Dropped > 0 {
			dropped = append(dropped, fmt.Sprintf("  %s: %s", t.Name, t.Drops.String()))
		}
	}
	tw.Flush()
	if len(dropped) > 0 {
		fmt.Fprintln(w, "\ndrops by type:")
		fmt.Fprintln(w, strings.Join(dropped, "\n"))
	}

	printDispatcher(w, st)
	printInPlace(w, st)
	printStages(w, st)

	// One section for any number of tenants (a server of one classifier
	// has one, the default).
	kind := "multi-tenant"
	if !st.MultiTenant {
		kind = fmt.Sprintf("a fixed set: policy %s has no tenant shares", st.Policy)
	}
	fmt.Fprintf(w, "\ntenants (%s; %d packets being classified):\n", kind, st.Classifying)
	printTenants(w, st.Tenants)
	for _, t := range st.Tenants {
		if t.Removed {
			continue
		}
		fmt.Fprintf(w, "  %s: %s", t.Name, tenantLine(t))
		if t.Drops != nil && t.Dropped > 0 {
			fmt.Fprintf(w, "; drops: %s", t.Drops.String())
		}
		printFaults(w, t)
		fmt.Fprintln(w)
	}
	return nil
}

// printDispatcher says how the dispatcher waits for requests.
func printDispatcher(w io.Writer, st *server.Status) {
	switch {
	case st.DispatcherSpinNs < 0:
		fmt.Fprintln(w, "\ndispatcher: busy-polls, never parks")
	case st.DispatcherSpinNs == 0:
		fmt.Fprintf(w, "\ndispatcher: parks as soon as it is idle (a request that finds it parked waits for a thread wake-up); parks so far: %d\n", st.DispatcherParks)
	default:
		fmt.Fprintf(w, "\ndispatcher: polls for %s after its last work, then parks (a request that finds it parked waits for a thread wake-up); parks so far: %d\n",
			ns(float64(st.DispatcherSpinNs)), st.DispatcherParks)
	}
}

// printInPlace says which requests the dispatcher served itself and why
// the others went to a worker's thread.
func printInPlace(w io.Writer, st *server.Status) {
	if st.InPlaceLimitNs <= 0 {
		fmt.Fprintln(w, "\nserved in place: off (every request is handed to its worker's thread)")
		return
	}
	fmt.Fprintf(w, "\nserved in place (by the dispatcher, for a parked worker, when the type's expected service is under %s):\n", ns(float64(st.InPlaceLimitNs)))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "NAME\tEXPECTED\tIN PLACE\tHANDED OFF\tWORKER AWAKE\tLONG\tUNPROFILED\tBURST\t")
	for _, t := range st.Types {
		h := t.HandOffs
		if t.InPlace+h.Total() == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", t.Name, ns(float64(t.ExpectedServiceNs)), t.InPlace, h.Total(), h.Awake, h.Long, h.Unprofiled, h.Burst)
	}
	tw.Flush()
}

// printFaults appends a tenant's classifier faults and breaker state.
func printFaults(w io.Writer, t server.TenantInfo) {
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
	if t.Disabled {
		fmt.Fprint(w, ", DISABLED (over its time limit: push a new classifier)")
	}
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

// shedByType lists the types shedding now, most first: ": LONG 512/s, ...".
func shedByType(st *server.Status) string {
	type rate struct {
		name string
		r    float64
	}
	var rs []rate
	for _, t := range st.Types {
		if t.ShedRate > 0 {
			rs = append(rs, rate{t.Name, t.ShedRate})
		}
	}
	if len(rs) == 0 {
		return ""
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].r > rs[j].r })
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%s %.0f/s", r.name, r.r)
	}
	return ": " + strings.Join(parts, ", ")
}

// ns formats nanoseconds as a duration.
func ns(v float64) string {
	if v == 0 {
		return "-"
	}
	return time.Duration(v).Round(10 * time.Nanosecond).String()
}

// kernelDrops adds up the kernel's drops at the server's sockets.
func kernelDrops(st *server.Status) uint64 {
	var n uint64
	for _, p := range st.KernelDrops {
		n += p.Drops
	}
	return n
}

// dataplaneLabel names the dataplane for the status line: the socket
// dataplane (configured as "udp") serves both UDP and TCP listen
// addresses, so it is named by what it listens on.
func dataplaneLabel(dataplane, listen string) string {
	if dataplane != server.DataplaneUDP {
		return dataplane
	}
	var kinds []string
	for _, addr := range strings.Split(listen, ",") {
		kind := "udp"
		if strings.HasPrefix(strings.TrimSpace(addr), "tcp://") {
			kind = "tcp"
		}
		if !slices.Contains(kinds, kind) {
			kinds = append(kinds, kind)
		}
	}
	return strings.Join(kinds, "+") + " sockets"
}
