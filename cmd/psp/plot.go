package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/persephone-go/psp/report"
	"github.com/urfave/cli/v2"
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
			"  psp plot --out charts sim.json psp-demo/results.csv",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Value: ".", Usage: "directory for the PNG files (created if missing)"},
			&cli.Float64Flag{Name: "slo", Usage: "draw a dashed line at this p99.9 slowdown on slowdown.png"},
			&cli.StringFlag{Name: "type", Usage: "plot the slowdown of this request type only (default: all requests)"},
			&cli.StringFlag{Name: "title", Usage: "title of slowdown.png (default: the workload and metric)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return fmt.Errorf("plot: give at least one results file (.csv or .json); see psp plot --help")
			}
			var points []report.Point
			for _, f := range c.Args().Slice() {
				pts, err := report.ReadFile(f)
				if err != nil {
					return fmt.Errorf("plot: %w", err)
				}
				points = append(points, pts...)
			}
			paths, err := writeChartFiles(c.String("out"), points, nil, report.PlotOptions{
				SLO: c.Float64("slo"), Type: c.String("type"), Title: c.String("title"),
			})
			if err != nil {
				return fmt.Errorf("plot: %w", err)
			}
			printWrittenFiles(c.App.Writer, paths)
			return nil
		},
	}
}

// writeChartFiles draws slowdown.png (points and slowdownOnly) and one
// latency-<type>.png per request type (points only: e.g. simulated and
// dilated latencies do not share a time scale) into dir and returns the
// paths written.
func writeChartFiles(dir string, points, slowdownOnly []report.Point, opt report.PlotOptions) ([]string, error) {
	if len(points) == 0 {
		return nil, fmt.Errorf("no points to plot")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	slowdown := filepath.Join(dir, "slowdown.png")
	all := append(append([]report.Point(nil), points...), slowdownOnly...)
	if err := report.PlotSlowdown(all, slowdown, opt); err != nil {
		return nil, err
	}
	latOpt := report.PlotOptions{Width: opt.Width, Height: opt.Height}
	lat, err := report.PlotLatencies(points, filepath.Join(dir, "latency-"), latOpt)
	if err != nil {
		return nil, err
	}
	return append([]string{slowdown}, lat...), nil
}

func printWrittenFiles(w io.Writer, paths []string) {
	for _, p := range paths {
		fmt.Fprintf(w, "wrote %s\n", p)
	}
}
