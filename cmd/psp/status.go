package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

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
			&cli.BoolFlag{Name: "json", Usage: "print the raw JSON document"},
			&cli.DurationFlag{Name: "timeout", Value: 5 * time.Second, Usage: "HTTP timeout"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("status: unexpected argument %q", c.Args().First())
			}
			body, err := fetchStatus(c.String("admin"), c.Duration("timeout"))
			if err != nil {
				return err
			}
			if c.Bool("json") {
				_, err := c.App.Writer.Write(body)
				return err
			}
			var st server.Status
			if err := json.Unmarshal(body, &st); err != nil {
				return fmt.Errorf("status: decode: %w", err)
			}
			return printStatus(c.App.Writer, &st)
		},
	}
}

// adminURL turns "host:port" or a URL into a base URL.
func adminURL(admin string) string {
	if strings.HasPrefix(admin, "http://") || strings.HasPrefix(admin, "https://") {
		return strings.TrimRight(admin, "/")
	}
	return "http://" + admin
}

func fetchStatus(admin string, timeout time.Duration) ([]byte, error) {
	client := &http.Client{Timeout: timeout}
	resp, err := client.Get(adminURL(admin) + "/status")
	if err != nil {
		return nil, fmt.Errorf("status: %w (is psp serve running with --admin %s?)", err, admin)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("status: read: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
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
		state, st.Listen, st.Dataplane, st.Policy, st.Phase, st.Workers, app, st.UptimeSec)
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

	fmt.Fprintln(w, "\ntypes:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ID\tNAME\tPROFILE MEAN\tRATIO\tQUEUED\tRECEIVED\tANSWERED\tDROPPED\tMEASURED MEAN\t")
	for _, t := range st.Types {
		if t.Received == 0 && t.ProfileCount == 0 && t.Queued == 0 {
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.3f\t%d\t%d\t%d\t%d\t%s\t\n", t.ID, t.Name, ns(t.MeanServiceNs), t.Ratio,
			t.Queued, t.Received, t.Answered, t.Dropped, ns(t.MeasuredMeanNs))
	}
	tw.Flush()

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

// ns formats nanoseconds as a duration.
func ns(v float64) string {
	if v == 0 {
		return "-"
	}
	return time.Duration(v).Round(10 * time.Nanosecond).String()
}
