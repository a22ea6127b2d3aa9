package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/server"
	"github.com/persephone-go/psp/wasmclass"
)

// serveCommand is `psp serve`: run the live server.
func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the request dispatcher: receive requests over UDP, classify, schedule with DARC, answer",
		Description: "psp serve runs the live server: a net worker and dispatcher loop feeding\n" +
			"application workers. Settings come from --config FILE (YAML; unknown keys are\n" +
			"errors) and are overridden by flags. SIGINT/SIGTERM stop it gracefully: queued\n" +
			"requests are answered before it exits; a second signal quits at once.\n" +
			"--print-config shows the effective config.\n\n" +
			"Example (emulated High Bimodal server on loopback, DARC after 500 samples):\n" +
			"  psp serve --app emulate --dilation 1000 --policy darc --workers 14 --min-samples 500",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Usage: "YAML config `FILE` (see examples/serve.yaml)"},
			&cli.BoolFlag{Name: "print-config", Usage: "print the effective config as YAML and exit"},
			&cli.StringFlag{Name: "listen", Aliases: []string{"l"}, Usage: "UDP `ADDR` requests arrive on", DefaultText: "" + server.DefaultListen + ""},
			&cli.StringFlag{Name: "dataplane", Usage: "`NAME`: udp (default), dpdk (build with -tags dpdk) or memnic (in memory, no network)"},
			&cli.StringFlag{Name: "eal", Usage: "DPDK EAL `ARGS`, space-separated (dpdk dataplane only)"},
			&cli.IntFlag{Name: "buffers", Usage: "packet buffer pool `SIZE`", DefaultText: "8192"},
			&cli.StringFlag{Name: "policy", Aliases: []string{"p"}, Usage: "scheduling `POLICY`: " + strings.Join(darc.PolicyNames(), ", ") + " (default darc)"},
			&cli.IntFlag{Name: "reserved", Usage: "workers darc-static reserves for the shortest type (`N`)"},
			&cli.IntFlag{Name: "workers", Aliases: []string{"w"}, Usage: "number of application workers `N`", DefaultText: "14"},
			&cli.StringFlag{Name: "cpus", Usage: "pin threads to a CPU `LIST` like 0-14: the dispatcher first, then the workers (default: no pinning)"},
			&cli.Float64Flag{Name: "delta", Usage: "DARC grouping factor", DefaultText: "0.2"},
			&cli.IntFlag{Name: "spillway", Usage: "spillway workers", DefaultText: "1"},
			&cli.IntFlag{Name: "queue-capacity", Usage: "capacity of each typed queue", DefaultText: "4096"},
			&cli.IntFlag{Name: "min-samples", Usage: "completions DARC profiles before reserving, and per profiling window", DefaultText: "50000; 500 with --app emulate"},
			&cli.Float64Flag{Name: "delay-factor", Usage: "queuing delay, in multiples of a type's mean, that triggers a reservation check (the paper uses 10)", DefaultText: "1"},
			&cli.Float64Flag{Name: "hysteresis", Usage: "a re-reservation keeps a group's worker count while its demand stays within count ± (0.5 + this); -1: the paper's plain rounding", DefaultText: "0.25"},
			&cli.StringFlag{Name: "idle", Usage: "idle `STRATEGY`: spin-then-park (default; shares cores) or busy-poll (the paper's; one core per thread)"},
			&cli.DurationFlag{Name: "spin", Usage: "how long idle threads spin before parking", DefaultText: "50µs"},
			&cli.IntFlag{Name: "burst", Usage: "receive burst size", DefaultText: "32"},
			&cli.DurationFlag{Name: "drain-timeout", Usage: "bound on the graceful shutdown", DefaultText: "5s"},
			&cli.StringFlag{Name: "classifier", Usage: "Wasm classifier `FILE` for every port (default: the native psp-header classifier)"},
			&cli.StringFlag{Name: "app", Aliases: []string{"a"}, Usage: "application `NAME`: emulate (default), spin, tpcc or kv"},
			&cli.Float64Flag{Name: "dilation", Usage: "time dilation `FACTOR` of emulate (1000: 1µs becomes 1ms) and of tpcc (sleeps when set)", DefaultText: "1000 for emulate, 0 (spin) for tpcc"},
			&cli.DurationFlag{Name: "spin-tail", Usage: "end of each emulated service time spent spinning, on top of the learned timer overshoot", DefaultText: "50µs"},
			&cli.StringFlag{Name: "kv-dir", Usage: "Pebble `DIR` for the kv app (default: in memory)"},
			&cli.IntFlag{Name: "kv-keys", Usage: "keys preloaded by the kv app", DefaultText: "5000"},
			&cli.StringFlag{Name: "admin", Usage: "admin HTTP `ADDR` for /status, /metrics and hot swaps, or off", DefaultText: "" + server.DefaultAdmin + ""},
			&cli.StringFlag{Name: "token-file", Usage: "`FILE` holding the bearer token required by PUT /tenants/{name}/classifier"},
		},
		Action: runServe,
	}
}

// serveConfig loads --config and applies the flags that were set.
func serveConfig(c *cli.Context) (server.Config, error) {
	var cfg server.Config
	if path := c.String("config"); path != "" {
		var err error
		if cfg, err = server.LoadConfig(path); err != nil {
			return cfg, err
		}
	}
	str := func(name string, dst *string) {
		if c.IsSet(name) {
			*dst = c.String(name)
		}
	}
	num := func(name string, dst *int) {
		if c.IsSet(name) {
			*dst = c.Int(name)
		}
	}
	flt := func(name string, dst *float64) {
		if c.IsSet(name) {
			*dst = c.Float64(name)
		}
	}
	str("listen", &cfg.Listen)
	str("dataplane", &cfg.Dataplane)
	if c.IsSet("eal") {
		cfg.EAL = strings.Fields(c.String("eal"))
	}
	num("buffers", &cfg.Buffers)
	str("policy", &cfg.Policy)
	num("reserved", &cfg.Reserved)
	num("workers", &cfg.Workers)
	str("cpus", &cfg.CPUs)
	flt("delta", &cfg.Delta)
	num("spillway", &cfg.Spillway)
	num("queue-capacity", &cfg.QueueCapacity)
	num("min-samples", &cfg.MinSamples)
	flt("delay-factor", &cfg.DelayFactor)
	flt("hysteresis", &cfg.Hysteresis)
	str("idle", &cfg.Idle)
	if c.IsSet("spin") {
		cfg.Spin = c.Duration("spin")
	}
	num("burst", &cfg.Burst)
	if c.IsSet("drain-timeout") {
		cfg.DrainTimeout = c.Duration("drain-timeout")
	}
	if c.IsSet("classifier") {
		cfg.Classifier = c.String("classifier")
		cfg.Tenants = nil
	}
	str("app", &cfg.App.Name)
	flt("dilation", &cfg.App.Dilation)
	if c.IsSet("spin-tail") {
		cfg.App.SpinTail = c.Duration("spin-tail")
	}
	str("kv-dir", &cfg.App.KV.Dir)
	num("kv-keys", &cfg.App.KV.Keys)
	str("admin", &cfg.Admin.Addr)
	str("token-file", &cfg.Admin.TokenFile)
	cfg = cfg.WithDefaults()
	return cfg, cfg.Validate()
}

func runServe(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("serve: unexpected argument %q (settings are flags or --config FILE)", c.Args().First())
	}
	cfg, err := serveConfig(c)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if c.Bool("print-config") {
		out, err := cfg.YAML()
		if err != nil {
			return err
		}
		_, err = c.App.Writer.Write(out)
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// The first signal starts the graceful shutdown; restore the
		// default action so that a second one ends the process at once
		// instead of being swallowed while the drain runs.
		<-ctx.Done()
		stop()
	}()
	srv, err := server.New(ctx, cfg, server.Options{Log: c.App.ErrWriter, Classifiers: wasmclass.Options{CompileInChild: true}})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return srv.Run(ctx)
}
