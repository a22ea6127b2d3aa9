package main

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/urfave/cli/v2"
)

// The command-line conventions (docs/operating.md, "Command-line conventions"):
//
//   - a short flag means the same in every command that has it (shortFlags);
//   - --json prints the command's result as JSON on stdout instead of a
//     table (progress and logs stay on stderr);
//   - a zero given explicitly is used with its documented meaning or
//     refused (refuseZero), never replaced by a default;
//   - settings people script also come from PSP_<FLAG> environment
//     variables (envFlags); a flag on the command line wins;
//   - flags may follow positional arguments (interspersed).

// shortFlags is every short flag and the long flag it stands for.
var shortFlags = map[string]string{
	"w": "workers",
	"l": "loads",
	"p": "policies",
	"d": "duration",
	"s": "seed",
	"o": "out",
	"q": "quiet",
	"a": "app",
	"c": "config",
	"i": "input",
	"f": "format",
}

// envFlags are the flags that also read PSP_<NAME> (upper case, - as _).
var envFlags = []string{
	"config", "listen", "admin", "dataplane", "eal", "app", "workers", "dilation",
	"classifier", "token-file", "tenant", "server", "workload",
}

// envVar is the environment variable of flag name.
func envVar(name string) string {
	return "PSP_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// applyConventions gives every command's flags their short alias and
// environment variable.
func applyConventions(a *cli.App) {
	short := map[string]string{}
	for s, long := range shortFlags {
		short[long] = s
	}
	env := map[string]bool{}
	for _, n := range envFlags {
		env[n] = true
	}
	var walk func(cmds []*cli.Command)
	walk = func(cmds []*cli.Command) {
		for _, cmd := range cmds {
			for _, f := range cmd.Flags {
				name := f.Names()[0]
				var aliases []string
				if s, ok := short[name]; ok {
					aliases = []string{s}
				}
				var vars []string
				if env[name] {
					vars = []string{envVar(name)}
				}
				setAliasesAndEnv(f, aliases, vars)
			}
			walk(cmd.Subcommands)
		}
	}
	walk(a.Commands)
}

// setAliasesAndEnv sets the Aliases and EnvVars fields every urfave/cli
// flag type has.
func setAliasesAndEnv(f cli.Flag, aliases, vars []string) {
	v := reflect.ValueOf(f)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("conventions: flag type %T not handled", f))
	}
	aliasField, envField := v.Elem().FieldByName("Aliases"), v.Elem().FieldByName("EnvVars")
	if !aliasField.IsValid() || !envField.IsValid() {
		panic(fmt.Sprintf("conventions: flag type %T not handled", f))
	}
	aliasField.Set(reflect.ValueOf(aliases))
	envField.Set(reflect.ValueOf(vars))
}

// jsonFlag is --json, the same in every command.
func jsonFlag() cli.Flag {
	return &cli.BoolFlag{Name: "json", Usage: "print the result as JSON on stdout instead of a table (progress stays on stderr)"}
}

// refuseZero returns an error for the first of names given explicitly as
// zero (0, 0s or an empty string): for these flags zero means nothing.
func refuseZero(c *cli.Context, names ...string) error {
	for _, n := range names {
		if !c.IsSet(n) {
			continue
		}
		zero := isZero(c.Value(n))
		if zero {
			return fmt.Errorf("--%s %v: zero is not a value here (leave the flag out for its default; see --help)", n, c.Value(n))
		}
	}
	return nil
}

// interspersed moves the flags of the leaf command in args before its
// positional arguments, so that flags may follow them (the flag parser
// stops at the first positional argument). Positional arguments are put
// after "--", so that they are never read as flags.
func interspersed(a *cli.App, args []string) []string {
	if len(args) < 2 || args[len(args)-1] == "--generate-bash-completion" {
		return args
	}
	out := []string{args[0]}
	rest := args[1:]
	var cmd *cli.Command
	cmds := a.Commands
	for len(rest) > 0 && len(cmds) > 0 {
		next := findCommand(cmds, rest[0])
		if next == nil {
			break
		}
		cmd, cmds = next, next.Subcommands
		out, rest = append(out, rest[0]), rest[1:]
	}
	if cmd == nil || (len(cmd.Subcommands) > 0 && len(cmd.Flags) == 0) {
		// Not a leaf: a command with subcommands and flags of its own
		// (psp rollout REF --servers ..., psp rollout status REF ...) is
		// one when no subcommand follows it.
		return args
	}
	var flags, positional []string
	for i := 0; i < len(rest); i++ {
		arg := rest[i]
		switch {
		case arg == "--":
			positional = append(positional, rest[i+1:]...)
			i = len(rest)
		case arg == "-" || !strings.HasPrefix(arg, "-"):
			positional = append(positional, arg)
		default:
			flags = append(flags, arg)
			name, _, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
			if !hasValue && takesValue(cmd, name) && i+1 < len(rest) {
				flags = append(flags, rest[i+1])
				i++
			}
		}
	}
	out = append(out, flags...)
	if len(positional) > 0 {
		out = append(append(out, "--"), positional...)
	}
	return out
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// takesValue reports whether cmd's flag name is followed by a value (any
// flag but a boolean one; unknown flags are left to the parser).
func takesValue(cmd *cli.Command, name string) bool {
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			if n == name {
				_, isBool := f.(*cli.BoolFlag)
				return !isBool
			}
		}
	}
	return false
}
