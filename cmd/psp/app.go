package main

import (
	"github.com/urfave/cli/v2"
)

// newApp builds the psp command line. Each subcommand lives in its own file
// (sim.go, serve.go, ...) and is listed here.
func newApp() *cli.App {
	return &cli.App{
		Name:  "psp",
		Usage: "a kernel-bypass request dispatcher with DARC scheduling and Wasm classifiers",
		Description: "psp dispatches microsecond-scale requests to pinned workers, reserving\n" +
			"cores for short request types (DARC) so they keep a low tail latency under\n" +
			"heavy-tailed service times. Classifiers are WebAssembly modules.",
		HideHelpCommand:      false,
		EnableBashCompletion: true,
		Commands: []*cli.Command{
			// subcommands are added here, one line each
			clientCommand(),
			serveCommand(),
			statusCommand(),
			sweepCommand(),
			plotCommand(),
			demoCommand(),
			simCommand(),
			classifierCommand(),
		},
	}
}
