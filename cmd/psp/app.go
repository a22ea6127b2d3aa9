package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"
)

// app is the psp command line. Run and RunContext accept flags after
// positional arguments (psp plot sim.json --out charts) in every command.
type app struct{ *cli.App }

// Run runs the command line args (args[0] is the program name).
func (a *app) Run(args []string) error { return a.RunContext(context.Background(), args) }

// RunContext is Run with a context.
func (a *app) RunContext(ctx context.Context, args []string) error {
	return a.App.RunContext(ctx, interspersed(a.App, args))
}

// newApp builds the psp command line. Each subcommand lives in its own file
// (sim.go, serve.go, ...) and is listed here; the conventions every command
// follows (short flags, --json, zeros, PSP_* variables) are applied and
// checked by conventions.go.
func newApp() *app {
	a := &cli.App{
		Name:  "psp",
		Usage: "a kernel-bypass request dispatcher with DARC scheduling and Wasm classifiers",
		Description: "psp dispatches microsecond-scale requests to pinned workers, reserving\n" +
			"cores for short request types (DARC) so they keep a low tail latency under\n" +
			"heavy-tailed service times. Classifiers are WebAssembly modules.\n\n" +
			"Settings people script can also come from PSP_* environment variables (see each\n" +
			"command's help, e.g. PSP_ADMIN); flags win over them. Shell completion:\n" +
			"psp completion bash|zsh.",
		Version:              version(),
		EnableBashCompletion: true,
		Commands: []*cli.Command{
			demoCommand(),
			serveCommand(),
			statusCommand(),
			clientCommand(),
			sweepCommand(),
			simCommand(),
			experimentCommand(),
			plotCommand(),
			classifierCommand(),
			tenantCommand(),
			rolloutCommand(),
			completionCommand(),
		},
		Action: unknownCommand,
	}
	applyConventions(a)
	return &app{a}
}

// unknownCommand is the action of a command that has subcommands: an
// argument that names none is an error, no argument shows the help.
func unknownCommand(c *cli.Context) error {
	if c.NArg() == 0 {
		return cli.ShowSubcommandHelp(c)
	}
	var names []string
	for _, sub := range c.Command.Subcommands {
		if !sub.Hidden && sub.Name != "help" {
			names = append(names, sub.Name)
		}
	}
	name := c.Command.HelpName
	if name == "" {
		name = c.App.Name
	}
	return fmt.Errorf("%s: unknown command %q (commands: %s; see %s --help)", name, c.Args().First(), strings.Join(names, ", "), name)
}

// version describes this build: the module version, the commit when known,
// the Go version and platform, and build tags.
func version() string {
	v := "(devel)"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v + " " + runtime.Version()
	}
	if bi.Main.Version != "" {
		v = bi.Main.Version
	}
	var rev, when, modified, tags string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		case "-tags":
			tags = s.Value
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += fmt.Sprintf(" (commit %s%s", rev, modified)
		if when != "" {
			v += ", " + when
		}
		v += ")"
	}
	v += fmt.Sprintf(", %s %s/%s", bi.GoVersion, runtime.GOOS, runtime.GOARCH)
	if tags != "" {
		v += ", tags " + tags
	}
	return v
}
