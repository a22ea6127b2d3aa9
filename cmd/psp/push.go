package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/persephone-go/psp/server"
)

// classifierPushCommand is `psp classifier push`: hot-swap a running
// server's classifier.
func classifierPushCommand() *cli.Command {
	return &cli.Command{
		Name:      "push",
		Usage:     "hot-swap the classifier of a running server's tenant",
		ArgsUsage: "FILE.wasm",
		Description: "Uploads FILE.wasm to PUT /tenants/NAME/classifier on the server's admin endpoint.\n" +
			"The server loads and validates it off the hot path and switches between batches;\n" +
			"if it fails to load, the running classifier stays and the error is printed.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "tenant", Value: server.DefaultTenant, Usage: "tenant `NAME` (a server started with --classifier has one tenant, \"default\")"},
			&cli.StringFlag{Name: "admin", Value: server.DefaultAdmin, Usage: "the server's admin `ADDR` (host:port or URL)"},
			&cli.StringFlag{Name: "token-file", Usage: "`FILE` holding the bearer token (the server's --token-file)"},
			&cli.DurationFlag{Name: "timeout", Value: 60 * time.Second, Usage: "HTTP timeout"},
		},
		Action: func(c *cli.Context) error {
			o, err := parsePushArgs(c)
			if err != nil {
				return fmt.Errorf("classifier push: %w", err)
			}
			wasm, err := os.ReadFile(o.file)
			if err != nil {
				return fmt.Errorf("classifier push: %w", err)
			}
			tok, err := os.ReadFile(o.tokenFile)
			if err != nil {
				return fmt.Errorf("classifier push: token: %w", err)
			}
			u := adminURL(o.admin) + "/tenants/" + url.PathEscape(o.tenant) + "/classifier"
			req, err := http.NewRequestWithContext(c.Context, http.MethodPut, u, bytes.NewReader(wasm))
			if err != nil {
				return fmt.Errorf("classifier push: %w", err)
			}
			req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
			req.Header.Set("Content-Type", "application/wasm")
			resp, err := (&http.Client{Timeout: o.timeout}).Do(req)
			if err != nil {
				return fmt.Errorf("classifier push: %w (is psp serve running with --admin %s?)", err, o.admin)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			if resp.StatusCode != http.StatusOK {
				var e struct {
					Error string `json:"error"`
				}
				msg := strings.TrimSpace(string(body))
				if json.Unmarshal(body, &e) == nil && e.Error != "" {
					msg = e.Error
				}
				return fmt.Errorf("classifier push: %s: %s", resp.Status, msg)
			}
			var res server.SwapResult
			if err := json.Unmarshal(body, &res); err != nil {
				return fmt.Errorf("classifier push: decode answer: %w", err)
			}
			fmt.Fprintf(c.App.Writer, "tenant %s now runs version %d (%s, %d bytes)\n", res.Tenant, res.Version, o.file, len(wasm))
			return nil
		},
	}
}

// pushArgs are push's settings.
type pushArgs struct {
	file, tenant, admin, tokenFile string
	timeout                        time.Duration
}

// parsePushArgs reads the flags, also when they follow FILE.wasm (the
// command-line library stops parsing flags at the first argument).
func parsePushArgs(c *cli.Context) (pushArgs, error) {
	o := pushArgs{tenant: c.String("tenant"), admin: c.String("admin"), tokenFile: c.String("token-file"), timeout: c.Duration("timeout")}
	args := c.Args().Slice()
	if len(args) == 0 {
		return o, fmt.Errorf("want a FILE.wasm argument")
	}
	o.file = args[0]
	if len(args) > 1 {
		fs := flag.NewFlagSet("push", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.StringVar(&o.tenant, "tenant", o.tenant, "")
		fs.StringVar(&o.admin, "admin", o.admin, "")
		fs.StringVar(&o.tokenFile, "token-file", o.tokenFile, "")
		fs.DurationVar(&o.timeout, "timeout", o.timeout, "")
		if err := fs.Parse(args[1:]); err != nil {
			return o, err
		}
		if fs.NArg() > 0 {
			return o, fmt.Errorf("want one FILE.wasm argument, got also %q", fs.Args())
		}
	}
	if o.tokenFile == "" {
		return o, fmt.Errorf("--token-file is required (the file holding the server's bearer token)")
	}
	return o, nil
}
