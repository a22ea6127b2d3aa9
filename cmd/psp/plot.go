package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/persephone-go/psp/harness"
	"github.com/persephone-go/psp/report"
)

func plotCommand() *cli.Command {
	return &cli.Command{
		Name:      "plot",
		Usage:     "draw p99.9 slowdown and latency charts from saved results (psp sweep, psp client --json, psp sim)",
		ArgsUsage: "FILE.csv|FILE.json...",
		Description: "psp plot reads results saved as CSV or JSON by psp sweep, psp client --json or\n" +
			"psp sim and draws, in --out: slowdown.png (p99.9 slowdown against offered load, one\n" +
			"line per policy) and latency-<type>.png (p99.9 latency of each request type).\n" +
			"Give several files to lay simulated and measured curves on one chart: lines are\n" +
			"labelled \"policy (source)\" when the points come from more than one source.\n\n" +
			"Example:\n" +
			"  psp plot psp-demo/results.csv psp-demo/sim.json --out charts",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Value: ".", Usage: "`DIR` for the PNG files (created if missing)"},
			&cli.Float64Flag{Name: "slo", Usage: "draw a dashed line at this p99.9 slowdown on slowdown.png (0: none)"},
			&cli.StringFlag{Name: "type", Usage: "plot the slowdown of this request type only (default: all requests)"},
			&cli.StringFlag{Name: "title", Usage: "title of slowdown.png (default: the workload, workers, duration and metric)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return fmt.Errorf("plot: give at least one results file (.csv or .json); see psp plot --help")
			}
			if err := refuseZero(c, "out"); err != nil {
				return fmt.Errorf("plot: %w", err)
			}
			var points []report.Point
			for _, f := range c.Args().Slice() {
				pts, err := report.ReadFile(f)
				if err != nil {
					return fmt.Errorf("plot: %w", err)
				}
				points = append(points, pts...)
			}
			paths, err := harness.WriteCharts(c.String("out"), points, nil, report.PlotOptions{
				SLO: c.Float64("slo"), Type: c.String("type"), Title: c.String("title"),
			})
			printWrittenFiles(c.App.Writer, paths)
			if err != nil {
				return fmt.Errorf("plot: %w", err)
			}
			return nil
		},
	}
}
