package main

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/persephone-go/psp/internal/boundedfile"
	"github.com/persephone-go/psp/wasmclass"
)

// classifierCommand is `psp classifier`: tools for Wasm classifiers.
func classifierCommand() *cli.Command {
	return &cli.Command{
		Name:  "classifier",
		Usage: "check, test and benchmark WebAssembly request classifiers",
		Description: "A classifier is a WebAssembly module implementing the ABI in sdk/ABI.md.\n" +
			"These tools load it exactly as the dispatcher does (validation, fuel\n" +
			"instrumentation, memory limit) and run it on payloads you supply.",
		Action: unknownCommand,
		Subcommands: []*cli.Command{
			classifierCheckCommand(),
			classifierTestCommand(),
			classifierBenchCommand(),
			classifierPushCommand(),    // push.go: hot-swap a running server's classifier
			classifierPublishCommand(), // fleet.go: push to an OCI registry
		},
	}
}

// classifierFlags are the loading options shared by the subcommands.
func classifierFlags() []cli.Flag {
	return []cli.Flag{
		&cli.Uint64Flag{Name: "fuel", Value: wasmclass.DefaultFuel,
			Usage: "fuel per call: loop iterations plus entries into functions that call others, before the classifier traps"},
		&cli.UintFlag{Name: "memory-pages", Value: wasmclass.DefaultMemoryLimitPages,
			Usage: "memory limit in 64 KiB pages; modules declaring more are refused"},
		&cli.IntFlag{Name: "max-size", Value: wasmclass.DefaultMaxModuleSize, Usage: "largest module accepted, in bytes"},
	}
}

// inputFlags select the payloads of test and bench.
func inputFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "input",
			Usage: "payload file (required by test), one payload per line (blank lines and lines starting with # are skipped; - for stdin)"},
		&cli.StringFlag{Name: "format", Value: "hex",
			Usage: `line format: "hex" (hex digits, spaces allowed: 0a0b 0c) or "text" (Go string escapes such as \r \n \x00, quotes as is: GET key\r\n)`},
	}
}

// fileArg returns the one FILE.wasm argument (flags may follow it).
func fileArg(c *cli.Context) (string, error) {
	switch c.NArg() {
	case 0:
		return "", fmt.Errorf("classifier %s: missing FILE.wasm argument", c.Command.Name)
	case 1:
		return c.Args().First(), nil
	}
	return "", fmt.Errorf("classifier %s: unexpected argument %q (one FILE.wasm only)", c.Command.Name, c.Args().Get(1))
}

// Bounds of the classifier commands' flags: a module as large as psp serve
// accepts (its classifier_options.max_module_size is at most 1 GiB), a bench of at
// most an hour per mode.
const (
	maxModuleSize    = 1 << 30
	maxBenchDuration = time.Hour
)

func loadClassifier(c *cli.Context) (*wasmclass.Module, string, error) {
	path, err := fileArg(c)
	if err != nil {
		return nil, "", err
	}
	if err := refuseZero(c, "fuel", "memory-pages", "max-size", "duration", "input"); err != nil {
		return nil, path, fmt.Errorf("classifier %s: %w", c.Command.Name, err)
	}
	if n := c.Int("max-size"); !(n >= 0 && n <= maxModuleSize) {
		return nil, path, fmt.Errorf("classifier %s: --max-size %d: want at most %d (1 GiB, as psp serve's classifier_options.max_module_size)", c.Command.Name, n, maxModuleSize)
	}
	if d := c.Duration("duration"); c.Command.Name == "bench" && !(d > 0 && d <= maxBenchDuration) {
		return nil, path, fmt.Errorf("classifier bench: --duration %v: want > 0 and at most %v per mode", d, maxBenchDuration)
	}
	if c.Command.Name == "test" && c.String("input") == "" {
		return nil, path, fmt.Errorf("classifier test: missing --input PAYLOADS (one payload per line)")
	}
	bin, err := boundedfile.Read(path, maxModuleFile)
	if err != nil {
		return nil, path, fmt.Errorf("classifier %s: %w", c.Command.Name, err)
	}
	m, err := wasmclass.Load(c.Context, bin, wasmclass.Options{
		Fuel:             c.Uint64("fuel"),
		MemoryLimitPages: uint32(c.Uint("memory-pages")),
		MaxModuleSize:    c.Int("max-size"),
	})
	if err != nil {
		return nil, path, fmt.Errorf("classifier %s %s: %w", c.Command.Name, path, err)
	}
	return m, path, nil
}

func classifierCheckCommand() *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "validate a classifier and print its types",
		UsageText: "psp classifier check [flags] FILE.wasm",
		Description: "Loads FILE.wasm as the dispatcher would and prints its ABI version, its\n" +
			"types, its I/O buffer and what the fuel instrumentation changed. Exits\n" +
			"non-zero with the reason if the module is refused.",
		Flags: classifierFlags(),
		Action: func(c *cli.Context) error {
			m, path, err := loadClassifier(c)
			if err != nil {
				return err
			}
			defer m.Close(c.Context)
			info := m.Info()
			w := c.App.Writer
			fmt.Fprintf(w, "%s: ok\n", path)
			fmt.Fprintf(w, "ABI version:  %d\n", info.ABIVersion)
			fmt.Fprintf(w, "I/O buffer:   address %d, %d bytes (%d packets per batch call)\n", info.IOBuffer, info.IOBufferSize, info.Slots)
			fmt.Fprintf(w, "memory:       %d pages declared, limit %d\n", info.MemoryPages, c.Uint("memory-pages"))
			switch {
			case info.WASI && info.Initialize:
				fmt.Fprintln(w, "imports:      wasi_snapshot_preview1 (psp's own; _initialize runs once, at load)")
			case info.WASI:
				fmt.Fprintln(w, "imports:      wasi_snapshot_preview1")
			default:
				fmt.Fprintln(w, "imports:      none")
			}
			f := info.Fuel
			growth := 0.0
			if f.CodeBytesBefore > 0 {
				growth = 100 * float64(f.CodeBytesAfter-f.CodeBytesBefore) / float64(f.CodeBytesBefore)
			}
			fmt.Fprintf(w, "fuel:         %d per call (%d for initialisation); metered %d function entries, %d loop back edges,\n"+
				"              %d sized instructions, %d WASI calls; %d functions keep the stack account (largest charge %d bytes);\n"+
				"              wrapped %d entry points; code %d -> %d bytes (+%.1f%%)\n",
				f.Budget, f.InitBudget, f.Functions, f.BackEdges, f.BulkOps, f.ImportCalls, f.StackFrames, f.MaxFrame,
				f.Wrapped, f.CodeBytesBefore, f.CodeBytesAfter, growth)
			fmt.Fprintf(w, "compile:      %v\n", info.Compile.Duration.Round(time.Millisecond))
			fmt.Fprintf(w, "types:        N = %d\n", info.NumTypes)
			for id, name := range info.TypeNames {
				fmt.Fprintf(w, "  %5d  %s\n", id, name)
			}
			return nil
		},
	}
}

func classifierTestCommand() *cli.Command {
	return &cli.Command{
		Name:      "test",
		Usage:     "classify payloads from a file and print the type of each",
		UsageText: "psp classifier test [flags] FILE.wasm --input PAYLOADS [--format hex|text]",
		Description: "Reads one payload per line from --input and prints, per payload, its index,\n" +
			"type id, type name and the payload. Payloads are classified in batches, as\n" +
			"the dispatcher does; faults (traps, fuel, out-of-range types) are reported\n" +
			"at the end and their packets show type 0.\n\n" +
			"Example (Redis, text lines):\n" +
			"  printf '%s\\n' 'GET key\\r\\n' '*1\\r\\n$4\\r\\nPING\\r\\n' > reqs.txt\n" +
			"  psp classifier test examples/classifiers/c/resp.wasm --input reqs.txt --format text",
		Flags: append(classifierFlags(), inputFlags()...),
		Action: func(c *cli.Context) error {
			m, _, err := loadClassifier(c)
			if err != nil {
				return err
			}
			defer m.Close(c.Context)
			payloads, err := readPayloads(c)
			if err != nil {
				return err
			}
			inst, err := m.NewInstance(c.Context)
			if err != nil {
				return fmt.Errorf("classifier test: %w", err)
			}
			defer inst.Close(c.Context)
			out := make([]uint32, len(payloads))
			inst.ClassifyBatch(payloads, out)
			names := m.Types()
			tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "#\ttype\tname\tpayload")
			for k, p := range payloads {
				fmt.Fprintf(tw, "%d\t%d\t%s\t%s\n", k, out[k], names[out[k]], quotePayload(p))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if f := inst.Faults(); f.Total() > 0 {
				fmt.Fprintf(c.App.Writer, "faults: %s\n", formatFaults(f))
			}
			return nil
		},
	}
}

func classifierBenchCommand() *cli.Command {
	return &cli.Command{
		Name:      "bench",
		Usage:     "measure the time per packet, one at a time and in batches of 32",
		UsageText: "psp classifier bench [flags] FILE.wasm [--input PAYLOADS]",
		Description: "Classifies the payloads of --input (default: 16-byte psp headers of types\n" +
			"1..N-1, see wire/wire.go) in a loop for --duration per mode and prints\n" +
			"nanoseconds per packet, single packets and batches of 32.",
		Flags: append(append(classifierFlags(), inputFlags()...),
			&cli.DurationFlag{Name: "duration", Value: time.Second, Usage: "measuring time per mode"}),
		Action: func(c *cli.Context) error {
			m, path, err := loadClassifier(c)
			if err != nil {
				return err
			}
			defer m.Close(c.Context)
			var payloads [][]byte
			if c.String("input") != "" {
				if payloads, err = readPayloads(c); err != nil {
					return err
				}
				if len(payloads) == 0 {
					return fmt.Errorf("classifier bench: %s has no payloads", c.String("input"))
				}
			} else {
				payloads = headerPayloads(m.NumTypes())
			}
			inst, err := m.NewInstance(c.Context)
			if err != nil {
				return fmt.Errorf("classifier bench: %w", err)
			}
			defer inst.Close(c.Context)
			d := c.Duration("duration")
			single := measure(d, func(k int) int {
				inst.Classify(payloads[k%len(payloads)])
				return 1
			})
			batch := make([][]byte, wasmclass.MaxBatch)
			out := make([]uint32, len(batch))
			batchNs := measure(d, func(k int) int {
				for j := range batch {
					batch[j] = payloads[(k*len(batch)+j)%len(payloads)]
				}
				inst.ClassifyBatch(batch, out)
				return len(batch)
			})
			w := c.App.Writer
			fmt.Fprintf(w, "%s: %d payloads, fuel %d\n", path, len(payloads), m.Info().Fuel.Budget)
			fmt.Fprintf(w, "single:       %8.1f ns/packet\n", single)
			fmt.Fprintf(w, "batch of %d:  %8.1f ns/packet\n", len(batch), batchNs)
			if f := inst.Faults(); f.Total() > 0 {
				fmt.Fprintf(w, "faults: %s (the figures include them)\n", formatFaults(f))
			}
			return nil
		},
	}
}

// measure runs step (which reports how many packets it classified) for
// about d and returns nanoseconds per packet.
func measure(d time.Duration, step func(k int) int) float64 {
	for k := 0; k < 100; k++ { // warm up
		step(k)
	}
	packets, k := 0, 0
	start := time.Now()
	for {
		for j := 0; j < 256; j++ {
			packets += step(k)
			k++
		}
		if el := time.Since(start); el >= d {
			return float64(el.Nanoseconds()) / float64(packets)
		}
	}
}

// headerPayloads returns psp request headers (16 bytes, type at offset 4)
// for types 1..n-1.
func headerPayloads(n int) [][]byte {
	count := max(n-1, 1)
	ps := make([][]byte, count)
	for k := range ps {
		p := make([]byte, 16)
		binary.LittleEndian.PutUint32(p[4:], uint32(k+1))
		ps[k] = p
	}
	return ps
}

// readPayloads reads --input in --format.
func readPayloads(c *cli.Context) ([][]byte, error) {
	name := c.String("input")
	format := c.String("format")
	if format != "hex" && format != "text" {
		return nil, fmt.Errorf("classifier %s: --format %q: want hex or text", c.Command.Name, format)
	}
	var r io.Reader
	if name == "-" {
		r = c.App.Reader
		if r == nil {
			r = os.Stdin
		}
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("classifier %s: %w", c.Command.Name, err)
		}
		defer f.Close()
		r = f
	}
	payloads, err := parsePayloads(r, format)
	if err != nil {
		return nil, fmt.Errorf("classifier %s: %s: %w", c.Command.Name, name, err)
	}
	return payloads, nil
}

// parsePayloads reads one payload per line: hex digits (spaces ignored) or
// Go string escapes. Blank lines and lines starting with # are skipped.
func parsePayloads(r io.Reader, format string) ([][]byte, error) {
	var payloads [][]byte
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if strings.TrimSpace(text) == "" || strings.HasPrefix(text, "#") {
			continue
		}
		var p []byte
		var err error
		if format == "hex" {
			p, err = hex.DecodeString(strings.Join(strings.Fields(text), ""))
		} else {
			var s string
			s, err = strconv.Unquote(`"` + escapeQuotes(text) + `"`)
			p = []byte(s)
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %w (format %s)", line, err, format)
		}
		payloads = append(payloads, p)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return payloads, nil
}

// escapeQuotes escapes the double quotes of s that are not escaped yet, so
// that text lines may contain " as is.
func escapeQuotes(s string) string {
	var b strings.Builder
	escaped := false
	for _, r := range s {
		if r == '"' && !escaped {
			b.WriteByte('\\')
		}
		escaped = r == '\\' && !escaped
		b.WriteRune(r)
	}
	return b.String()
}

// quotePayload shows a payload as a Go string, cut to 40 bytes.
func quotePayload(p []byte) string {
	if len(p) > 40 {
		return strconv.Quote(string(p[:40])) + fmt.Sprintf("... (%d bytes)", len(p))
	}
	return strconv.Quote(string(p))
}

func formatFaults(f wasmclass.FaultCounts) string {
	return fmt.Sprintf("trap %d, fuel %d, bad count %d, out of range %d, breaker open %d (packets sent to type 0)",
		f.Trap, f.Fuel, f.BadCount, f.OutOfRange, f.BreakerOpen)
}
