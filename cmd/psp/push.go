package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/persephone-go/psp/admin"
	"github.com/persephone-go/psp/internal/boundedfile"
	"github.com/persephone-go/psp/server"
)

// classifierPushCommand is `psp classifier push`: hot-swap a running
// server's classifier.
func classifierPushCommand() *cli.Command {
	return &cli.Command{
		Name:      "push",
		Usage:     "hot-swap the classifier of a running server's tenant",
		ArgsUsage: "FILE.wasm|oci://REF",
		Description: "Uploads FILE.wasm to PUT /tenants/NAME/classifier on the server's admin endpoint.\n" +
			"An oci://HOST/REPO[:TAG][@sha256:...] reference is pulled here (a digest verified) and\n" +
			"uploaded with its pinned reference, which psp status then shows. --expect-sha256 or\n" +
			"--expect-version make the swap conditional: refused (409) unless that module runs.\n" +
			"The server loads and validates it off the hot path and switches between batches;\n" +
			"if it fails to load, the running classifier stays and the error is printed.\n" +
			"psp tenant rollback NAME swaps the previous module back in.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "tenant", Value: server.DefaultTenant, Usage: "tenant `NAME` (a server started with --classifier has one tenant, \"default\")"},
			&cli.StringFlag{Name: "admin", Value: server.DefaultAdmin, Usage: "the server's admin `ADDR` (host:port or URL)"},
			&cli.StringFlag{Name: "token-file", Usage: "`FILE` holding the bearer token: the tenant's own, or the operator's (the server's --token-file)"},
			&cli.DurationFlag{Name: "timeout", Value: admin.DefaultSwapTimeout, Usage: "HTTP timeout"},
			&cli.StringFlag{Name: "expect-sha256", Usage: "swap only if the running module has this `SHA256` (hex), else 409"},
			&cli.IntFlag{Name: "expect-version", Usage: "swap only if the running version is `N`, else 409"},
		}, ociFlags()...),
		Action: func(c *cli.Context) error {
			file, err := fileArg(c)
			if err != nil {
				return err
			}
			if err := refuseZero(c, "tenant", "admin", "token-file", "timeout", "expect-sha256", "expect-version"); err != nil {
				return fmt.Errorf("classifier push: %w", err)
			}
			if c.String("token-file") == "" {
				return fmt.Errorf("classifier push: --token-file is required (the file holding the server's bearer token)")
			}
			if c.Duration("timeout") < 0 {
				return fmt.Errorf("classifier push: --timeout %v: want > 0", c.Duration("timeout"))
			}
			ctx, cancel := signalContext(c.Context)
			defer cancel()
			wasm, ref, err := readClassifier(ctx, c, file)
			if err != nil {
				return fmt.Errorf("classifier push: %w", err)
			}
			tok, err := boundedfile.Read(c.String("token-file"), server.MaxTokenFile)
			if err != nil {
				return fmt.Errorf("classifier push: token: %w", err)
			}
			ac, err := admin.NewClient(c.String("admin"), c.Duration("timeout"))
			if err != nil {
				return fmt.Errorf("classifier push: --admin: %w", err)
			}
			start := time.Now()
			res, err := ac.PushClassifierIf(ctx, c.String("tenant"), wasm, string(tok),
				admin.SwapOptions{ExpectSHA256: c.String("expect-sha256"), ExpectVersion: c.Int("expect-version"), Reference: ref})
			if err != nil {
				return err
			}
			src := file
			if ref != "" {
				src = ref
			}
			fmt.Fprintf(c.App.Writer, "tenant %s now runs version %d (%s, %d bytes, sha256 %s, swapped in %v)\n",
				res.Tenant, res.Version, src, len(wasm), res.SHA256, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
}
