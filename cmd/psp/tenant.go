package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	json "github.com/goccy/go-json"
	"github.com/urfave/cli/v2"

	"github.com/persephone-go/psp/admin"
	"github.com/persephone-go/psp/internal/affinity"
	"github.com/persephone-go/psp/internal/boundedfile"
	"github.com/persephone-go/psp/server"
)

// tenantCommand is `psp tenant`: a server's tenants.
func tenantCommand() *cli.Command {
	return &cli.Command{
		Name:  "tenant",
		Usage: "list, add, update, remove a running server's tenants; roll back a classifier",
		Description: "A psp serve is the set of its tenants: those of its config, or one, \"default\", of\n" +
			"--classifier (or of the native classifier) owning every port. Under policy darc or\n" +
			"darc-static each tenant has its ports, its classifier, its own types and DARC reservation,\n" +
			"and its share of the workers and of the buffer pool, and these commands change them\n" +
			"without a restart (the other policies have no shares: their tenants are fixed at start).\n" +
			"add, update and remove need the operator's token (--token-file);\n" +
			"rollback takes the tenant's own token or the operator's. Every attempt is in the\n" +
			"server's audit log.",
		Action: unknownCommand,
		Subcommands: []*cli.Command{
			tenantListCommand(),
			tenantAddCommand(),
			tenantUpdateCommand(),
			tenantRemoveCommand(),
			tenantRollbackCommand(),
			tenantTokenCommand(),
		},
	}
}

// adminFlags are the flags of commands that talk to a running server.
func adminFlags(token bool) []cli.Flag {
	fs := []cli.Flag{
		&cli.StringFlag{Name: "admin", Value: server.DefaultAdmin, Usage: "the server's admin `ADDR` (host:port or URL)"},
		&cli.DurationFlag{Name: "timeout", Value: admin.DefaultTimeout, Usage: "HTTP timeout (adding a tenant waits for its classifier to compile, at least 60s)"},
	}
	if token {
		fs = append(fs, &cli.StringFlag{Name: "token-file", Usage: "`FILE` holding the bearer token (the operator's; rollback: the tenant's too)"})
	} else {
		fs = append(fs, readTokenFlag())
	}
	return fs
}

// adminClient checks the admin flags and returns a client, and the token
// when the command needs one.
func adminClient(c *cli.Context, what string, token bool) (*admin.Client, string, error) {
	if err := refuseZero(c, "admin", "timeout"); err != nil {
		return nil, "", fmt.Errorf("%s: %w", what, err)
	}
	if c.Duration("timeout") < 0 {
		return nil, "", fmt.Errorf("%s: --timeout %v: want > 0", what, c.Duration("timeout"))
	}
	ac, err := admin.NewClient(c.String("admin"), c.Duration("timeout"))
	if err != nil {
		return nil, "", fmt.Errorf("%s: --admin: %w", what, err)
	}
	if !token {
		return ac, "", setReadToken(c, ac, what)
	}
	path := c.String("token-file")
	if path == "" {
		return nil, "", fmt.Errorf("%s: --token-file is required (the file holding the bearer token)", what)
	}
	b, err := boundedfile.Read(path, server.MaxTokenFile)
	if err != nil {
		return nil, "", fmt.Errorf("%s: token: %w", what, err)
	}
	return ac, strings.TrimSpace(string(b)), nil
}

// readTokenFlag is the token-file flag of read-only commands.
func readTokenFlag() cli.Flag {
	return &cli.StringFlag{Name: "token-file", Usage: "`FILE` holding a bearer token for reads (needed when the server has tokens: the operator's, the read-only one or a tenant's)"}
}

// setReadToken gives admin the token of --token-file, when given.
func setReadToken(c *cli.Context, ac *admin.Client, what string) error {
	path := c.String("token-file")
	if path == "" {
		return nil
	}
	b, err := boundedfile.Read(path, server.MaxTokenFile)
	if err != nil {
		return fmt.Errorf("%s: token: %w", what, err)
	}
	ac.SetToken(string(b))
	return nil
}

// nameArg returns the one NAME argument.
func nameArg(c *cli.Context, what string) (string, error) {
	switch c.NArg() {
	case 0:
		return "", fmt.Errorf("%s: missing the tenant's NAME", what)
	case 1:
		return c.Args().First(), nil
	}
	return "", fmt.Errorf("%s: unexpected argument %q (one NAME only)", what, c.Args().Get(1))
}

// shareFlags are the tenant settings add and update take.
func shareFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "ports", Usage: "the tenant's UDP `PORTS`, comma-separated, runs as ranges (7001,7005-7010; add: none makes it the default tenant)"},
		&cli.IntFlag{Name: "workers", Usage: "workers guaranteed to the tenant (`N`; 0 or unset: a part of the rest by --weight)"},
		&cli.Float64Flag{Name: "weight", Usage: "the tenant's share of the workers and buffers nobody claims by count (default 1)"},
		&cli.IntFlag{Name: "max-workers", Usage: "most workers running the tenant's requests at once (0: no ceiling)"},
		&cli.IntFlag{Name: "buffers", Usage: "requests the tenant can always hold (0: a part of half the pool by weight)"},
		&cli.IntFlag{Name: "max-buffers", Usage: "most requests the tenant holds at once (0: its guarantee plus the shared part)"},
		&cli.StringFlag{Name: "tenant-token-file", Usage: "`FILE` holding the tenant's own token (only its SHA-256 is sent)"},
		&cli.StringFlag{Name: "tenant-token-sha256", Usage: "the SHA-256 of the tenant's own token, 64 hex digits (psp tenant token prints it)"},
	}
}

// parsePorts parses --ports (see server.ParsePorts).
func parsePorts(s string) ([]uint16, error) {
	ports, err := server.ParsePorts(s)
	if err != nil {
		return nil, fmt.Errorf("--ports: %w", err)
	}
	return ports, nil
}

// tenantTokenDigest returns the digest the tenant token flags give ("":
// none).
func tenantTokenDigest(c *cli.Context) (string, error) {
	file, digest := c.String("tenant-token-file"), c.String("tenant-token-sha256")
	switch {
	case file != "" && digest != "":
		return "", fmt.Errorf("--tenant-token-file and --tenant-token-sha256 are exclusive")
	case file != "":
		b, err := boundedfile.Read(file, server.MaxTokenFile)
		if err != nil {
			return "", fmt.Errorf("--tenant-token-file: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("--tenant-token-file %s is empty", file)
		}
		return server.TokenDigest(tok), nil
	case digest != "":
		if _, err := server.ParseTokenDigest(digest); err != nil {
			return "", fmt.Errorf("--tenant-token-sha256: %w", err)
		}
		return strings.ToLower(strings.TrimSpace(digest)), nil
	}
	return "", nil
}

// checkShareFlags refuses negative values.
func checkShareFlags(c *cli.Context) error {
	for _, n := range []string{"workers", "max-workers", "buffers", "max-buffers"} {
		if c.Int(n) < 0 {
			return fmt.Errorf("--%s %d: want >= 0", n, c.Int(n))
		}
	}
	if c.IsSet("weight") && !(c.Float64("weight") > 0) {
		return fmt.Errorf("--weight %v: want > 0", c.Float64("weight"))
	}
	return nil
}

func tenantListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list the tenants: ports, classifier module (SHA-256, version, load time), share, counters",
		Flags: append(adminFlags(false), jsonFlag()),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("tenant list: unexpected argument %q", c.Args().First())
			}
			ac, _, err := adminClient(c, "tenant list", false)
			if err != nil {
				return err
			}
			ts, err := ac.Tenants(c.Context)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return writeJSONOut(c.App.Writer, ts)
			}
			printTenants(c.App.Writer, ts)
			return nil
		},
	}
}

func tenantAddCommand() *cli.Command {
	return &cli.Command{
		Name:      "add",
		Usage:     "add a tenant to a running server (policy darc or darc-static)",
		ArgsUsage: "NAME",
		Description: "Adds tenant NAME with its classifier (--classifier FILE.wasm; without it, the\n" +
			"application's native classifier), its ports, its share and its own token. The server\n" +
			"loads the module off the hot path, opens the ports on its dataplane and gives the\n" +
			"tenant its share; nothing restarts.\n\n" +
			"Example:\n" +
			"  psp tenant add kv --ports 11211 --classifier memcached.wasm --workers 4 \\\n" +
			"      --tenant-token-file kv.token --token-file operator.token",
		Flags: append(append(adminFlags(true),
			&cli.StringFlag{Name: "classifier", Usage: "the tenant's Wasm classifier `FILE` or oci://REF, pulled here (default: the application's native classifier)"},
			&cli.IntFlag{Name: "max-types", Usage: "room for hot swaps with more types (default: the module's count)"},
			&cli.StringFlag{Name: "fail", Usage: "failure `POLICY` of its classifier: open (faults classify UNKNOWN), closed (faults drop the request) or reload (drop it, and a fresh instance for the next; shut out only when crash-looping)", DefaultText: "open"},
			jsonFlag()), append(shareFlags(), ociFlags()...)...),
		Action: func(c *cli.Context) error {
			name, err := nameArg(c, "tenant add")
			if err != nil {
				return err
			}
			if err := refuseZero(c, "classifier", "ports", "weight", "tenant-token-file", "tenant-token-sha256"); err != nil {
				return fmt.Errorf("tenant add: %w", err)
			}
			if err := checkShareFlags(c); err != nil {
				return fmt.Errorf("tenant add: %w", err)
			}
			t := server.Tenant{Name: name, Workers: c.Int("workers"), Weight: c.Float64("weight"), MaxWorkers: c.Int("max-workers"),
				Buffers: c.Int("buffers"), MaxBuffers: c.Int("max-buffers"), MaxTypes: c.Int("max-types")}
			if t.Ports, err = parsePorts(c.String("ports")); err != nil {
				return fmt.Errorf("tenant add: %w", err)
			}
			if t.TokenSHA256, err = tenantTokenDigest(c); err != nil {
				return fmt.Errorf("tenant add: %w", err)
			}
			t.Fail = c.String("fail")
			if f := c.String("classifier"); f != "" {
				if t.Wasm, _, err = readClassifier(c.Context, c, f); err != nil {
					return fmt.Errorf("tenant add: %w", err)
				}
			}
			ac, token, err := adminClient(c, "tenant add", true)
			if err != nil {
				return err
			}
			ctx, cancel := signalContext(c.Context)
			defer cancel()
			start := time.Now()
			ti, err := ac.AddTenant(ctx, t, token)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return writeJSONOut(c.App.Writer, ti)
			}
			fmt.Fprintf(c.App.Writer, "tenant %s added in %v: %s\n", name, time.Since(start).Round(time.Millisecond), tenantLine(ti))
			return nil
		},
	}
}

func tenantUpdateCommand() *cli.Command {
	return &cli.Command{
		Name:      "update",
		Usage:     "change a tenant's ports, share or token (the flags given; the others stay)",
		ArgsUsage: "NAME",
		Description: "Changes what the flags give and leaves the rest. A classifier changes with\n" +
			"psp classifier push --tenant NAME; psp tenant rollback NAME undoes a push.",
		Flags: append(append(adminFlags(true), jsonFlag()), shareFlags()...),
		Action: func(c *cli.Context) error {
			name, err := nameArg(c, "tenant update")
			if err != nil {
				return err
			}
			if err := checkShareFlags(c); err != nil {
				return fmt.Errorf("tenant update: %w", err)
			}
			var u server.TenantUpdate
			if c.IsSet("ports") {
				ports, err := parsePorts(c.String("ports"))
				if err != nil {
					return fmt.Errorf("tenant update: %w", err)
				}
				u.Ports = &ports
			}
			intp := func(n string) *int {
				if !c.IsSet(n) {
					return nil
				}
				v := c.Int(n)
				return &v
			}
			u.Workers, u.MaxWorkers, u.Buffers, u.MaxBuffers = intp("workers"), intp("max-workers"), intp("buffers"), intp("max-buffers")
			if c.IsSet("weight") {
				w := c.Float64("weight")
				u.Weight = &w
			}
			if c.IsSet("tenant-token-file") || c.IsSet("tenant-token-sha256") {
				d, err := tenantTokenDigest(c)
				if err != nil {
					return fmt.Errorf("tenant update: %w", err)
				}
				u.TokenSHA256 = &d
			}
			if u == (server.TenantUpdate{}) {
				return fmt.Errorf("tenant update: nothing to change (give --ports, --workers, --weight, --max-workers, --buffers, --max-buffers or a tenant token)")
			}
			ac, token, err := adminClient(c, "tenant update", true)
			if err != nil {
				return err
			}
			ti, err := ac.UpdateTenant(c.Context, name, u, token)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return writeJSONOut(c.App.Writer, ti)
			}
			fmt.Fprintf(c.App.Writer, "tenant %s updated: %s\n", name, tenantLine(ti))
			return nil
		},
	}
}

func tenantRemoveCommand() *cli.Command {
	return &cli.Command{
		Name:      "remove",
		Usage:     "remove a tenant: its queued requests are dropped (counted as removed), its running ones answered",
		ArgsUsage: "NAME",
		Flags:     adminFlags(true),
		Action: func(c *cli.Context) error {
			name, err := nameArg(c, "tenant remove")
			if err != nil {
				return err
			}
			ac, token, err := adminClient(c, "tenant remove", true)
			if err != nil {
				return err
			}
			if err := ac.RemoveTenant(c.Context, name, token); err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "tenant %s removed (its counters stay in psp status)\n", name)
			return nil
		},
	}
}

func tenantRollbackCommand() *cli.Command {
	return &cli.Command{
		Name:      "rollback",
		Usage:     "swap a tenant's previous classifier back in (a second rollback undoes the first)",
		ArgsUsage: "NAME",
		Flags:     append(adminFlags(true), jsonFlag()),
		Action: func(c *cli.Context) error {
			name, err := nameArg(c, "tenant rollback")
			if err != nil {
				return err
			}
			ac, token, err := adminClient(c, "tenant rollback", true)
			if err != nil {
				return err
			}
			ctx, cancel := signalContext(c.Context)
			defer cancel()
			res, err := ac.Rollback(ctx, name, token)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return writeJSONOut(c.App.Writer, res)
			}
			fmt.Fprintf(c.App.Writer, "tenant %s now runs version %d (module sha256 %s, %d bytes)\n", res.Tenant, res.Version, res.SHA256, res.Size)
			return nil
		},
	}
}

func tenantTokenCommand() *cli.Command {
	return &cli.Command{
		Name:  "token",
		Usage: "print the SHA-256 of a token, for token_sha256 in a config (the token from --file or standard input)",
		Flags: []cli.Flag{&cli.StringFlag{Name: "file", Usage: "`FILE` holding the token (default: standard input)"}},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("tenant token: unexpected argument %q (the token is read from --file or standard input, never from the command line)", c.Args().First())
			}
			var r io.Reader = os.Stdin
			if f := c.String("file"); f != "" {
				fh, err := boundedfile.Open(f, server.MaxTokenFile)
				if err != nil {
					return fmt.Errorf("tenant token: %w", err)
				}
				defer fh.Close()
				r = fh
			}
			line, err := bufio.NewReader(io.LimitReader(r, 1<<16)).ReadString('\n')
			if err != nil && err != io.EOF {
				return fmt.Errorf("tenant token: %w", err)
			}
			if strings.TrimSpace(line) == "" {
				return fmt.Errorf("tenant token: empty token")
			}
			fmt.Fprintln(c.App.Writer, server.TokenDigest(line))
			return nil
		},
	}
}

// writeJSONOut prints v as indented JSON.
func writeJSONOut(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// tenantLine describes a tenant on one line.
func tenantLine(t server.TenantInfo) string {
	var parts []string
	switch {
	case t.Removed:
		parts = append(parts, "REMOVED")
	case t.Native:
		parts = append(parts, "native classifier")
	default:
		m := fmt.Sprintf("wasm, version %d, sha256 %s (%d bytes)", t.Version, t.SHA256, t.Size)
		if t.Reference != "" {
			m += ", from " + t.Reference
		}
		if t.Fail == "closed" || t.Fail == "reload" {
			m += ", fails " + t.Fail
		}
		if t.LoadedAt != "" {
			if at, err := time.Parse(time.RFC3339Nano, t.LoadedAt); err == nil {
				m += ", loaded " + at.Local().Format("2006-01-02 15:04:05")
			}
		}
		parts = append(parts, m)
		parts = append(parts, fleetNotes(t)...)
	}
	ports := "default (every port no other tenant has)"
	if len(t.Ports) > 0 {
		ports = "ports " + server.FormatPorts(t.Ports)
	}
	parts = append(parts, ports)
	if t.Isolation != "" && !t.Native {
		iso := "classified " + t.Isolation
		if t.OnLane && t.Isolation == "auto" {
			iso += ", on its own goroutine now"
		}
		if t.Escalations > 0 {
			iso += fmt.Sprintf(" (moved there %d times by a fault or a slow call)", t.Escalations)
		}
		parts = append(parts, iso)
	}
	if sh := t.Share; sh != nil {
		ceiling := ""
		if sh.MaxWorkers > 0 {
			ceiling = fmt.Sprintf(", ceiling %d", sh.MaxWorkers)
		}
		parts = append(parts, fmt.Sprintf("home workers [%s]%s, busy %d (borrowed %d), lent %d", affinity.FormatList(sh.HomeWorkers), ceiling, sh.Busy, sh.Borrowed, sh.Lent))
		if sh.Budget > 0 {
			parts = append(parts, fmt.Sprintf("buffers %d held, %d guaranteed, %d at most", sh.Held, sh.Guarantee, sh.Budget))
		}
	}
	return strings.Join(parts, "; ")
}

// short abbreviates a SHA-256 for tables.
func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	if sha == "" {
		return "-"
	}
	return sha
}

// printTenants prints one block per tenant.
func printTenants(w io.Writer, ts []server.TenantInfo) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tPORTS\tVERSION\tSHA256\tLOADED\tHOME\tBUSY\tBORROWED\tLENT\tRECEIVED\tANSWERED\tDROPPED\tQUEUED\tCLASSIFYING\tFAULTS\t")
	for _, t := range ts {
		ports := "default"
		if len(t.Ports) > 0 {
			ports = server.FormatPorts(t.Ports)
		}
		version, sha, loaded := strconv.Itoa(t.Version), short(t.SHA256), "-"
		if t.Native {
			sha = "native"
		}
		if t.Removed {
			version, sha = "removed", "-"
		}
		if at, err := time.Parse(time.RFC3339Nano, t.LoadedAt); err == nil && t.LoadedAt != "" {
			loaded = at.Local().Format("15:04:05")
		}
		home, busy, borrowed, lent := "-", "-", "-", "-"
		if sh := t.Share; sh != nil {
			home = "[" + affinity.FormatList(sh.HomeWorkers) + "]"
			busy, borrowed, lent = strconv.Itoa(sh.Busy), strconv.Itoa(sh.Borrowed), strconv.Itoa(sh.Lent)
		}
		var faults uint64
		for _, v := range t.Faults {
			faults += v
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", t.Name, ports, version, sha, loaded,
			home, busy, borrowed, lent, t.Received, t.Answered, t.Dropped, t.Queued, t.Classifying, faults)
	}
	tw.Flush()
	for _, t := range ts {
		if t.Removed || t.Native {
			continue
		}
		if t.Reference != "" || t.Fail == "closed" || t.Fail == "reload" {
			line := t.Name + ":"
			if t.Reference != "" {
				line += " module from " + t.Reference
			}
			if t.Fail == "closed" || t.Fail == "reload" {
				line += " (fails " + t.Fail + ")"
			}
			fmt.Fprintln(w, line)
		}
		for _, n := range fleetNotes(t) {
			fmt.Fprintf(w, "%s: %s\n", t.Name, n)
		}
	}
}

// fleetNotes say what a tenant's module owes to the fleet: a swap
// awaiting its confirmation, a module not fetched yet, a module other
// than the config's.
func fleetNotes(t server.TenantInfo) []string {
	var out []string
	if p := t.Provisional; p != nil {
		until := p.Until
		if at, err := time.Parse(time.RFC3339Nano, p.Until); err == nil {
			until = at.Local().Format("15:04:05")
		}
		out = append(out, fmt.Sprintf("PROVISIONAL: reverts to %s at %s unless confirmed", short(t.PreviousSHA256), until))
	}
	if t.Pending != "" {
		out = append(out, "PENDING: "+t.Pending)
	}
	if t.Configured != "" {
		out = append(out, "differs from its config, which names "+t.Configured+" (started from the state file, or swapped since)")
	}
	return out
}
