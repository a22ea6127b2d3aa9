package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/persephone-go/psp/admin"
	"github.com/persephone-go/psp/fleet"
	"github.com/persephone-go/psp/internal/boundedfile"
	"github.com/persephone-go/psp/oci"
	"github.com/persephone-go/psp/server"
	"github.com/persephone-go/psp/wasmclass"
)

// ociFlags say how oci:// references are reached.
func ociFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "plain-http", Usage: "speak plain HTTP to a registry off loopback too (registries on loopback always are)"},
		&cli.StringFlag{Name: "docker-config", Usage: "Docker config `FILE` with the registry's credentials (default: $DOCKER_CONFIG/config.json, else ~/.docker/config.json)"},
		&cli.StringFlag{Name: "oci-cache", Usage: "`DIR` keeping pulled modules by digest, or off (default: psp/oci in the user's cache directory)"},
	}
}

func ociClient(c *cli.Context) *oci.Client {
	return &oci.Client{PlainHTTP: c.Bool("plain-http"), DockerConfig: c.String("docker-config"),
		CacheDir: oci.CacheDir(c.String("oci-cache")), MaxSize: maxModuleFile}
}

// maxModuleFile bounds a module file the CLI reads (the server takes 8
// MiB by default; a larger one is refused there, with its limit in the
// message). Token files are bounded as the server bounds its own
// (server.MaxTokenFile).
const maxModuleFile = 64 << 20

// readClassifier reads a classifier argument: a file, or an oci://
// reference pulled (and verified, when it has a digest). ref is the
// reference pinned by digest ("" for a file).
func readClassifier(ctx context.Context, c *cli.Context, arg string) (wasm []byte, ref string, err error) {
	if !oci.IsRef(arg) {
		wasm, err = boundedfile.Read(arg, maxModuleFile)
		return wasm, "", err
	}
	r, err := oci.ParseRef(arg)
	if err != nil {
		return nil, "", err
	}
	m, err := ociClient(c).Pull(ctx, r)
	if err != nil {
		return nil, "", err
	}
	if m.Warning != "" {
		fmt.Fprintf(c.App.ErrWriter, "warning: %s\n", m.Warning)
	}
	return m.Wasm, m.Ref.String(), nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// classifierPublishCommand is `psp classifier publish`.
func classifierPublishCommand() *cli.Command {
	return &cli.Command{
		Name:      "publish",
		Usage:     "push a classifier to an OCI registry; print its reference pinned by digest",
		ArgsUsage: "FILE.wasm oci://HOST[:PORT]/REPO[:TAG]",
		Description: "Pushes FILE.wasm in the Wasm image format Istio and Envoy read, the two-layer \"oci\"\n" +
			"variant Istio's fetcher accepts: a runtime config (application/vnd.module.wasm.config.v1+json,\n" +
			"{\"type\": \"psp_classifier\", \"abiVersions\": [\"psp_abi_v1\"], \"config\": {\"types\": [...]}}) as the\n" +
			"manifest's config and its first layer, then the module (application/vnd.module.wasm.content.layer.v1+wasm),\n" +
			"tagged TAG (default latest). The last line of stdout is the reference pinned by digest,\n" +
			"oci://HOST/REPO@sha256:..., for psp serve --classifier, a tenant's classifier:,\n" +
			"psp tenant add --classifier, psp classifier push and psp rollout. Publishing the same\n" +
			"bytes again gives the same digest. Credentials come from the Docker config file; a\n" +
			"registry off loopback is spoken to over HTTPS unless --plain-http. The module is loaded\n" +
			"first, as psp classifier check does: one psp serve would refuse is not published.\n\n" +
			"psp serve pulls every shape Istio and Envoy Gateway read too: the oci variant, the compat\n" +
			"variant (the last layer a tar archive holding plugin.wasm, OCI or Docker media types) and\n" +
			"the Wasm working group's artifact (an application/wasm layer).",
		Flags: append(ociFlags(), &cli.BoolFlag{Name: "no-check", Usage: "publish without loading the module first (one meant for servers with larger limits)"}),
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return fmt.Errorf("classifier publish: want FILE.wasm and oci://HOST/REPO[:TAG], got %d arguments", c.NArg())
			}
			file, to := c.Args().Get(0), c.Args().Get(1)
			ref, err := oci.ParseRef(to)
			if err != nil {
				return fmt.Errorf("classifier publish: %w", err)
			}
			if ref.Digest != "" {
				return fmt.Errorf("classifier publish: %s: publish to a tag; the digest is the registry's answer", to)
			}
			wasm, err := boundedfile.Read(file, maxModuleFile)
			if err != nil {
				return fmt.Errorf("classifier publish: %w", err)
			}
			ctx, cancel := signalContext(c.Context)
			defer cancel()
			var rc oci.RuntimeConfig
			if !c.Bool("no-check") {
				// What a server would refuse is not worth a tag: load it as
				// psp classifier check does, with the default limits.
				m, err := wasmclass.Load(ctx, wasm, wasmclass.Options{})
				if err != nil {
					return fmt.Errorf("classifier publish: %s is not a classifier psp serve loads (see psp classifier check; --no-check publishes it anyway): %w", file, err)
				}
				rc.Config = map[string]any{"types": m.Types()}
				m.Close(ctx)
			}
			client := ociClient(c)
			if !c.IsSet("oci-cache") {
				client.CacheDir = "" // the registry has it; keep a copy only when asked
			}
			if c.Bool("no-check") {
				client.MaxSize = maxModuleFile // for servers with larger limits
			}
			pinned, err := client.PublishConfig(ctx, wasm, ref, rc)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.ErrWriter, "published %s (%d bytes, module sha256 %s)\n", file, len(wasm), sha256Hex(wasm))
			fmt.Fprintf(c.App.Writer, "tag: %s\n", pinned)
			fmt.Fprintln(c.App.Writer, pinned.Pinned())
			return nil
		},
	}
}

// rolloutCommand is `psp rollout`.
func rolloutCommand() *cli.Command {
	return &cli.Command{
		Name:      "rollout",
		Usage:     "roll a classifier out to many servers in waves, with canary analysis and automatic rollback",
		ArgsUsage: "oci://REF|FILE.wasm",
		Description: "Swaps the tenant's classifier on the first --canary servers of --servers, lets them run it\n" +
			"for --bake, and judges each against a baseline; if every canary passes, the next wave\n" +
			"(--wave servers, default all the rest but the control group), and so on; the last\n" +
			"--control servers (default 1) stay on the old module until every other wave passed, so\n" +
			"that every wave before theirs is compared with servers on the old module in the same\n" +
			"window; they are compared with their own last window on it. A failed wave stops the\n" +
			"rollout and rolls back every server swapped so far; later waves are never touched.\n\n" +
			"The module is pulled once here (a digest is verified) and uploaded to each server with\n" +
			"its pinned reference, which psp status and psp tenant list then show. Every swap is a\n" +
			"compare-and-swap on the module the server ran when the rollout read it, and every\n" +
			"rollback one on the module rolled out: a server changed by someone else meanwhile is\n" +
			"refused (409) and reported, never overwritten. Every swap is provisional: the server\n" +
			"rolls it back by itself unless the rollout renews it within --confirm-deadline, which it\n" +
			"does while it runs, and confirms it once every wave passed; a rollout killed mid-way\n" +
			"leaves no server on the module for longer than that. psp rollout status says where a\n" +
			"rollout stands; the same psp rollout run again resumes it: a server still running the\n" +
			"module provisionally is adopted (renewed, judged with its wave, confirmed or rolled back).\n\n" +
			"The analysis reads what the servers already measure, as its growth over the bake (from\n" +
			"each server's GET /status and GET /metrics, or from --prometheus):\n" +
			"  faults    the tenant's classifier faults per request (traps, fuel, bad answers,\n" +
			"            packets refused by an open breaker)\n" +
			"  UNKNOWN   the share of the tenant's requests classified UNKNOWN\n" +
			"  errors    drops for app, panic, tx_error and classifier_fault per request\n" +
			"  type mix  each type's share of the tenant's requests, compared as a total variation\n" +
			"            distance (0: the same mix, 1: disjoint): a module that types every request\n" +
			"            alike shows here\n" +
			"  p99.9     each type's p99.9 latency in the server over the bake, from the buckets of\n" +
			"            psp_request_latency_seconds; compared only for types with\n" +
			"            --min-latency-samples answers on both sides\n" +
			"A server fails when it saw fewer than --min-requests requests (nothing to judge), when\n" +
			"its faults, UNKNOWN share or errors exceed the baseline's by more than --max-fault-rate,\n" +
			"--max-unknown-increase or --max-error-rate, its type mix diverges by more than\n" +
			"--max-mix-divergence plus what sampling explains, or a type's p99.9 exceeds\n" +
			"--max-latency-ratio x the baseline's plus --latency-slack (the baseline's p99.9 is the\n" +
			"highest of its servers'). A wave whose faults or UNKNOWN requests already exceed their\n" +
			"bound over the whole bake's expected requests is judged at once. Traffic must flow\n" +
			"during the bake: the rollout sends none.\n\n" +
			"A table per wave shows each server's figures, the baseline's in parentheses, the verdict\n" +
			"and why; progress goes to stderr. Exit status 0: every server runs the module, confirmed;\n" +
			"1: stopped and rolled back (or the rollback incomplete, said per server).\n\n" +
			"  psp rollout oci://127.0.0.1:5000/psp/kv@sha256:... --servers a:9090,b:9090,c:9090 \\\n" +
			"      --tenant kv --canary 1 --bake 30s --token-file operator.token",
		Flags: append(rolloutTargetFlags(), append([]cli.Flag{
			&cli.IntFlag{Name: "canary", Value: 1, Usage: "servers in the first wave"},
			&cli.IntFlag{Name: "wave", Usage: "servers in each later wave (default: all the rest but the control group)"},
			&cli.IntFlag{Name: "control", Value: 1, Usage: "servers kept on the old module until every other wave passed, the baseline of every wave before theirs (0: none)"},
			&cli.DurationFlag{Name: "bake", Value: time.Minute, Usage: "how long each wave runs the module before it is judged"},
			&cli.DurationFlag{Name: "confirm-deadline", Value: fleet.DefaultConfirmDeadline, Usage: "a swapped server reverts by itself unless the rollout renews or confirms its swap within this (the rollout renews it while it runs)"},
			&cli.StringFlag{Name: "prometheus", Usage: "`URL` of a Prometheus server scraping the servers (as instance=\"HOST:PORT\" of each admin address): the analysis reads the counters and histograms from it instead of from each server"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the plan (servers, their running modules, waves, bounds) and change nothing (reads with --token-file when given; fails when no server could be read)"},
			&cli.Float64Flag{Name: "max-fault-rate", Value: 0.001, Usage: "most classifier faults per request above the baseline's"},
			&cli.Float64Flag{Name: "max-unknown-increase", Value: 0.01, Usage: "most share of UNKNOWN requests above the baseline's"},
			&cli.Float64Flag{Name: "max-error-rate", Value: 0.001, Usage: "most error drops per request above the baseline's"},
			&cli.Float64Flag{Name: "max-mix-divergence", Value: 0.1, Usage: "most total variation distance between a server's type mix and the baseline's, on top of what sampling explains"},
			&cli.Float64Flag{Name: "max-latency-ratio", Value: 2, Usage: "most p99.9 of a type, in multiples of the baseline's (plus --latency-slack)"},
			&cli.DurationFlag{Name: "latency-slack", Value: time.Millisecond, Usage: "p99.9 allowance on top of the ratio (the histograms resolve to their buckets)"},
			&cli.Uint64Flag{Name: "min-requests", Value: 100, Usage: "least requests of the tenant a server must see during the bake to be judged"},
			&cli.Uint64Flag{Name: "min-latency-samples", Value: 10000, Usage: "least answers of a type, on each side, to compare its p99.9 (10000: ten above it)"},
		}, ociFlags()...)...),
		Action:      runRollout,
		Subcommands: []*cli.Command{rolloutStatusCommand()},
	}
}

// rolloutTargetFlags name the servers and the tenant of a rollout.
func rolloutTargetFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "servers", Usage: "the servers' admin `ADDRS`, comma-separated, in rollout order"},
		&cli.StringFlag{Name: "tenant", Value: server.DefaultTenant, Usage: "tenant `NAME` whose classifier is replaced"},
		&cli.StringFlag{Name: "token-file", Usage: "`FILE` holding the bearer token (the operator's or the tenant's)"},
		&cli.DurationFlag{Name: "timeout", Value: admin.DefaultTimeout, Usage: "HTTP timeout of each admin request"},
	}
}

// rolloutStatusCommand is `psp rollout status`.
func rolloutStatusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "say where a rollout of a module stands: which servers run it, confirmed or provisionally, and which do not",
		ArgsUsage: "oci://REF|FILE.wasm",
		Description: "Reads each server's tenant and compares it with the module: confirmed, provisional (a rollout\n" +
			"swapped it and has not confirmed it yet: the server reverts at the deadline shown unless it\n" +
			"does), another module, or unreadable. Exit status 0 when every server runs it confirmed, 1\n" +
			"otherwise. A rollout killed mid-way shows its provisional servers here until they revert;\n" +
			"psp rollout again resumes it (servers that run the module confirmed are not swapped again).",
		Flags: append(rolloutTargetFlags(), ociFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("rollout status: want one oci://REF or FILE.wasm, got %d arguments", c.NArg())
			}
			p, err := rolloutTarget(c)
			if err != nil {
				return fmt.Errorf("rollout status: %w", err)
			}
			p.Bake = time.Second // not used: a plan needs one to be valid
			ctx, cancel := signalContext(c.Context)
			defer cancel()
			mod, err := rolloutModule(ctx, c)
			if err != nil {
				return fmt.Errorf("rollout status: %w", err)
			}
			states, err := fleet.Inspect(ctx, p)
			if err != nil {
				return fmt.Errorf("rollout status: %w", err)
			}
			if s := fleet.WriteStatus(c.App.Writer, p.Tenant, mod, states); s.Confirmed != len(states) {
				return fmt.Errorf("rollout status: %d of %d server(s) run the module, confirmed", s.Confirmed, len(states))
			}
			return nil
		},
	}
}

// rolloutTarget reads the servers, tenant, token and timeout of a
// rollout into a plan.
func rolloutTarget(c *cli.Context) (fleet.Plan, error) {
	if err := refuseZero(c, "servers", "tenant", "timeout"); err != nil {
		return fleet.Plan{}, err
	}
	var servers []string
	for _, s := range strings.Split(c.String("servers"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			servers = append(servers, s)
		}
	}
	if len(servers) == 0 {
		return fleet.Plan{}, errors.New("--servers is required (the admin addresses, comma-separated)")
	}
	p := fleet.Plan{Servers: servers, Tenant: c.String("tenant"), Timeout: c.Duration("timeout")}
	if f := c.String("token-file"); f != "" {
		tok, err := boundedfile.Read(f, server.MaxTokenFile)
		if err != nil {
			return p, fmt.Errorf("token: %w", err)
		}
		p.Token = strings.TrimSpace(string(tok))
	}
	return p, nil
}

// rolloutModule reads the module argument.
func rolloutModule(ctx context.Context, c *cli.Context) (fleet.Module, error) {
	wasm, ref, err := readClassifier(ctx, c, c.Args().First())
	if err != nil {
		return fleet.Module{}, err
	}
	mod := fleet.Module{Wasm: wasm, SHA256: sha256Hex(wasm), Reference: ref}
	if ref == "" {
		mod.Reference = c.Args().First()
	}
	return mod, nil
}

// readable counts the servers whose tenant could be read.
func readable(states []fleet.ServerState) int {
	n := 0
	for _, s := range states {
		if s.Err == nil {
			n++
		}
	}
	return n
}

func runRollout(c *cli.Context) error {
	if c.NArg() != 1 {
		return fmt.Errorf("rollout: want one oci://REF or FILE.wasm, got %d arguments", c.NArg())
	}
	if err := refuseZero(c, "canary", "wave", "bake", "confirm-deadline", "max-latency-ratio", "min-requests", "min-latency-samples", "prometheus"); err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	p, err := rolloutTarget(c)
	if err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	for _, f := range []string{"max-fault-rate", "max-unknown-increase", "max-error-rate", "max-mix-divergence"} {
		if v := c.Float64(f); !(v >= 0 && v <= 1) {
			return fmt.Errorf("rollout: --%s %v: want a fraction in [0, 1]", f, v)
		}
	}
	if v := c.Float64("max-latency-ratio"); !(v >= 1 && v <= fleet.MaxLatencyRatio) {
		return fmt.Errorf("rollout: --max-latency-ratio %v: want a factor in [1, %d] (2: the new module's p99.9 may be twice the baseline's)", v, fleet.MaxLatencyRatio)
	}
	if d := c.Duration("latency-slack"); !(d >= 0 && d <= fleet.MaxLatencySlack) {
		return fmt.Errorf("rollout: --latency-slack %v: want 0 to %v", d, fleet.MaxLatencySlack)
	}
	if d := c.Duration("confirm-deadline"); d < fleet.MinConfirmDeadline || d > fleet.MaxConfirmDeadline {
		return fmt.Errorf("rollout: --confirm-deadline %v: want %v to %v", d, fleet.MinConfirmDeadline, fleet.MaxConfirmDeadline)
	}
	if n := c.Int("control"); n < 0 {
		return fmt.Errorf("rollout: --control %d: want >= 0", n)
	}
	p.Canary, p.Wave, p.Bake = c.Int("canary"), c.Int("wave"), c.Duration("bake")
	p.Control, p.ConfirmDeadline, p.Prometheus = c.Int("control"), c.Duration("confirm-deadline"), c.String("prometheus")
	if p.Control == 0 {
		p.Control = -1 // --control 0: none
	}
	p.Bounds = fleet.Bounds{FaultRate: c.Float64("max-fault-rate"), UnknownShare: c.Float64("max-unknown-increase"),
		ErrorRate: c.Float64("max-error-rate"), MixDivergence: c.Float64("max-mix-divergence"),
		LatencyRatio: c.Float64("max-latency-ratio"), LatencySlack: c.Duration("latency-slack"),
		MinRequests: c.Uint64("min-requests"), MinLatencySamples: c.Uint64("min-latency-samples")}
	// A zero bound given explicitly means "no worse at all".
	for f, v := range map[string]*float64{"max-fault-rate": &p.Bounds.FaultRate, "max-unknown-increase": &p.Bounds.UnknownShare,
		"max-error-rate": &p.Bounds.ErrorRate, "max-mix-divergence": &p.Bounds.MixDivergence} {
		if *v == 0 && c.IsSet(f) {
			*v = 1e-12
		}
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	ctx, cancel := signalContext(c.Context)
	defer cancel()
	mod, err := rolloutModule(ctx, c)
	if err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	if c.Bool("dry-run") {
		before, err := fleet.Inspect(ctx, p)
		if err != nil {
			return fmt.Errorf("rollout: %w", err)
		}
		fleet.WritePlan(c.App.Writer, p, mod, before)
		fmt.Fprintln(c.App.Writer, "dry run: nothing changed")
		if readable(before) == 0 {
			return fmt.Errorf("rollout: dry run: none of the %d servers could be read (see the errors above; check --servers, --token-file and that the servers run)", len(before))
		}
		return nil
	}
	if p.Token == "" {
		return errors.New("rollout: --token-file is required (the file holding the bearer token)")
	}
	before, err := fleet.Inspect(ctx, p)
	if err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	fleet.WritePlan(c.App.Writer, p, mod, before)
	rep, err := fleet.Run(ctx, p, mod, func(format string, args ...any) { fmt.Fprintf(c.App.ErrWriter, format, args...) })
	if rep != nil {
		rep.Write(c.App.Writer)
	}
	if err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	return nil
}
