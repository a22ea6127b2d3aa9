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
			"(--wave servers, default all the rest), and so on. A failed wave stops the rollout and\n" +
			"rolls back every server swapped so far; servers of later waves are never touched.\n\n" +
			"The module is pulled once here (a digest is verified) and uploaded to each server with\n" +
			"its pinned reference, which psp status and psp tenant list then show. Every swap is a\n" +
			"compare-and-swap on the module the server ran when the rollout read it, and every\n" +
			"rollback one on the module rolled out: a server changed by someone else meanwhile is\n" +
			"refused (409) and reported, never overwritten.\n\n" +
			"The analysis reads what the servers already measure, as its growth over the bake:\n" +
			"  faults    the tenant's classifier faults per request (traps, fuel, bad answers,\n" +
			"            packets refused by an open breaker), from GET /status\n" +
			"  UNKNOWN   the share of the tenant's requests classified UNKNOWN\n" +
			"  errors    drops for app, panic, tx_error and classifier_fault per request\n" +
			"  p99.9     each type's p99.9 latency in the server over the bake, from the buckets of\n" +
			"            psp_request_latency_seconds (GET /metrics); compared only for types with\n" +
			"            --min-latency-samples answers on both sides\n" +
			"The baseline is the servers still on the old module over the same window (a last wave:\n" +
			"the servers that passed on the new module in earlier waves, same window; a plan of one\n" +
			"wave first observes every server on the old module for --bake); its p99.9 is the highest\n" +
			"of those servers' own, so the spread across the fleet in one window is allowed for.\n" +
			"A server fails when it saw fewer than --min-requests requests (nothing to judge), or\n" +
			"when its faults, UNKNOWN share or errors exceed the baseline's by more than\n" +
			"--max-fault-rate, --max-unknown-increase or --max-error-rate, or a type's p99.9 exceeds\n" +
			"--max-latency-ratio x the baseline's plus --latency-slack. Traffic must flow during the\n" +
			"bake: the rollout sends none.\n\n" +
			"A table per wave shows each server's figures, the baseline's in parentheses, the verdict\n" +
			"and why; progress goes to stderr. Exit status 0: every server runs the module; 1: stopped\n" +
			"and rolled back (or the rollback incomplete, said per server).\n\n" +
			"  psp rollout oci://127.0.0.1:5000/psp/kv@sha256:... --servers a:9090,b:9090,c:9090 \\\n" +
			"      --tenant kv --canary 1 --bake 30s --token-file operator.token",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "servers", Usage: "the servers' admin `ADDRS`, comma-separated, in rollout order"},
			&cli.StringFlag{Name: "tenant", Value: server.DefaultTenant, Usage: "tenant `NAME` whose classifier is replaced"},
			&cli.IntFlag{Name: "canary", Value: 1, Usage: "servers in the first wave"},
			&cli.IntFlag{Name: "wave", Usage: "servers in each later wave (default: all the rest at once)"},
			&cli.DurationFlag{Name: "bake", Value: time.Minute, Usage: "how long each wave runs the module before it is judged"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the plan (servers, their running modules, waves, bounds) and change nothing (reads with --token-file when given; fails when no server could be read)"},
			&cli.StringFlag{Name: "token-file", Usage: "`FILE` holding the bearer token (the operator's or the tenant's)"},
			&cli.DurationFlag{Name: "timeout", Value: admin.DefaultTimeout, Usage: "HTTP timeout of each admin request"},
			&cli.Float64Flag{Name: "max-fault-rate", Value: 0.001, Usage: "most classifier faults per request above the baseline's"},
			&cli.Float64Flag{Name: "max-unknown-increase", Value: 0.01, Usage: "most share of UNKNOWN requests above the baseline's"},
			&cli.Float64Flag{Name: "max-error-rate", Value: 0.001, Usage: "most error drops per request above the baseline's"},
			&cli.Float64Flag{Name: "max-latency-ratio", Value: 2, Usage: "most p99.9 of a type, in multiples of the baseline's (plus --latency-slack)"},
			&cli.DurationFlag{Name: "latency-slack", Value: time.Millisecond, Usage: "p99.9 allowance on top of the ratio (the histograms resolve to their buckets)"},
			&cli.Uint64Flag{Name: "min-requests", Value: 100, Usage: "least requests of the tenant a server must see during the bake to be judged"},
			&cli.Uint64Flag{Name: "min-latency-samples", Value: 10000, Usage: "least answers of a type, on each side, to compare its p99.9 (10000: ten above it)"},
		}, ociFlags()...),
		Action: runRollout,
	}
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
	if err := refuseZero(c, "servers", "tenant", "canary", "wave", "bake", "timeout", "max-latency-ratio", "min-requests", "min-latency-samples"); err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	var servers []string
	for _, s := range strings.Split(c.String("servers"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			servers = append(servers, s)
		}
	}
	if len(servers) == 0 {
		return errors.New("rollout: --servers is required (the admin addresses, comma-separated)")
	}
	for _, f := range []string{"max-fault-rate", "max-unknown-increase", "max-error-rate"} {
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
	p := fleet.Plan{Servers: servers, Tenant: c.String("tenant"), Canary: c.Int("canary"), Wave: c.Int("wave"), Bake: c.Duration("bake"),
		Timeout: c.Duration("timeout"),
		Bounds: fleet.Bounds{FaultRate: c.Float64("max-fault-rate"), UnknownShare: c.Float64("max-unknown-increase"),
			ErrorRate: c.Float64("max-error-rate"), LatencyRatio: c.Float64("max-latency-ratio"), LatencySlack: c.Duration("latency-slack"),
			MinRequests: c.Uint64("min-requests"), MinLatencySamples: c.Uint64("min-latency-samples")}}
	// A zero bound given explicitly means "no worse at all".
	for f, v := range map[string]*float64{"max-fault-rate": &p.Bounds.FaultRate, "max-unknown-increase": &p.Bounds.UnknownShare, "max-error-rate": &p.Bounds.ErrorRate} {
		if *v == 0 && c.IsSet(f) {
			*v = 1e-12
		}
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	ctx, cancel := signalContext(c.Context)
	defer cancel()
	wasm, ref, err := readClassifier(ctx, c, c.Args().First())
	if err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	mod := fleet.Module{Wasm: wasm, SHA256: sha256Hex(wasm), Reference: ref}
	if ref == "" {
		mod.Reference = c.Args().First()
	}
	// A dry run reads the servers with the token when given (servers with
	// tokens refuse reads without one); a rollout needs it.
	if f := c.String("token-file"); f != "" {
		tok, err := boundedfile.Read(f, server.MaxTokenFile)
		if err != nil {
			return fmt.Errorf("rollout: token: %w", err)
		}
		p.Token = strings.TrimSpace(string(tok))
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
	if c.String("token-file") == "" {
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
