package wasmclass

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
)

// compiledModule is the compile stage's result: a runtime holding the
// compiled module and psp's WASI.
type compiledModule struct {
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	cleanup  func()
	stats    CompileStats
}

// CompileStats describe a module's compilation.
type CompileStats struct {
	Duration time.Duration // compile stage, child included
	InChild  bool
	// ChildMaxRSS is the child's peak resident memory, in bytes.
	ChildMaxRSS int64
}

// runtimeConfig is the configuration of every runtime that compiles or
// runs a classifier; the compile child uses the same, so that the parent
// finds the child's work in the file cache.
func runtimeConfig(memoryPages uint32) wazero.RuntimeConfig {
	return wazero.NewRuntimeConfig().WithMemoryLimitPages(memoryPages).WithCloseOnContextDone(false).WithDebugInfoEnabled(false).
		WithMemoryCapacityFromMax(true) // growing never copies the memory
}

// compile is the fifth stage: it compiles the instrumented binary in a
// runtime of the module's own, with psp's WASI, within
// Options.CompileTimeout (and, in a child process, Options.CompileMemory).
func compile(ctx context.Context, bin []byte, opts Options) (*compiledModule, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.CompileTimeout)
	defer cancel()
	start := time.Now()
	c := &compiledModule{cleanup: func() {}}
	defer func() { c.stats.Duration = time.Since(start) }()
	cache := opts.Cache
	if opts.CompileInChild && cache == nil && opts.CacheDir == "" {
		// The child fills a file cache; the parent reads it.
		dir, err := os.MkdirTemp("", "psp-wasm-cache-")
		if err != nil {
			return nil, fmt.Errorf("wasmclass: compile: %w", err)
		}
		c.cleanup = func() { os.RemoveAll(dir) }
		opts.CacheDir = dir
	}
	if cache == nil && opts.CacheDir != "" {
		dc, err := wazero.NewCompilationCacheWithDir(opts.CacheDir)
		if err != nil {
			c.cleanup()
			return nil, fmt.Errorf("wasmclass: compilation cache %q: %w", opts.CacheDir, err)
		}
		prev := c.cleanup
		c.cleanup = func() { _ = dc.Close(context.Background()); prev() }
		cache = dc
	}
	if opts.CompileInChild {
		dir := opts.CacheDir
		if dir == "" {
			c.cleanup()
			return nil, fmt.Errorf("wasmclass: compile in a child needs a file cache (Options.CacheDir), not only Options.Cache: %w", ErrBadSpec)
		}
		rss, err := compileInChild(ctx, bin, dir, opts)
		if err != nil {
			c.cleanup()
			return nil, err
		}
		c.stats.InChild, c.stats.ChildMaxRSS = true, rss
	}
	cfg := runtimeConfig(opts.MemoryLimitPages)
	if cache != nil {
		cfg = cfg.WithCompilationCache(cache)
	}
	c.rt = wazero.NewRuntimeWithConfig(ctx, cfg)
	if err := instantiateWASI(ctx, c.rt); err != nil {
		c.close()
		return nil, fmt.Errorf("wasmclass: instantiate WASI: %w", err)
	}
	var err error
	if c.compiled, err = compileBounded(ctx, c.rt, bin); err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			c.cleanup() // compileBounded closes c.rt when the compiler returns
			return nil, fmt.Errorf("wasmclass: compile: %w: %w (Options.CompileTimeout is %v)", err, ErrCompile, opts.CompileTimeout)
		}
		c.close()
		return nil, fmt.Errorf("wasmclass: compile: %v: %w", err, ErrInvalidModule)
	}
	return c, nil
}

func (c *compiledModule) close() {
	if c.rt != nil {
		_ = c.rt.Close(context.Background())
	}
	c.cleanup()
}

// compileBounded compiles in a goroutine and stops waiting when ctx is
// done: wazero's compiler cannot be interrupted, so an abandoned
// compilation finishes in the background and its runtime is closed then.
func compileBounded(ctx context.Context, rt wazero.Runtime, bin []byte) (wazero.CompiledModule, error) {
	type result struct {
		cm  wazero.CompiledModule
		err error
	}
	done := make(chan result, 1)
	go func() {
		cm, err := rt.CompileModule(context.Background(), bin)
		done <- result{cm, err}
	}()
	select {
	case r := <-done:
		return r.cm, r.err
	case <-ctx.Done():
		go func() {
			<-done
			_ = rt.Close(context.Background())
		}()
		return nil, ctx.Err()
	}
}

// Environment of the compile child.
const (
	childEnv       = "PSP_WASMCLASS_COMPILE_CACHE" // the file cache directory
	childMemoryEnv = "PSP_WASMCLASS_COMPILE_MEMORY"
	childPagesEnv  = "PSP_WASMCLASS_COMPILE_PAGES"
	childExitError = 3
)

// compileInChild runs the current executable as a compile child: it reads
// the module on stdin, compiles it into the file cache dir under an
// address-space limit, and exits. It is killed when ctx is done.
func compileInChild(ctx context.Context, bin []byte, dir string, opts Options) (maxRSS int64, _ error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("wasmclass: compile child: %w: %w", err, ErrCompile)
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(),
		childEnv+"="+dir,
		childMemoryEnv+"="+strconv.FormatUint(opts.CompileMemory, 10),
		childPagesEnv+"="+strconv.FormatUint(uint64(opts.MemoryLimitPages), 10))
	cmd.Stdin = bytes.NewReader(bin)
	var stderr bytes.Buffer
	cmd.Stderr = &limitedWriter{w: &stderr, n: 4096}
	cmd.WaitDelay = time.Second
	start := time.Now()
	err = cmd.Run()
	if cmd.ProcessState != nil {
		maxRSS = childMaxRSS(cmd.ProcessState)
	}
	switch {
	case ctx.Err() != nil:
		return maxRSS, fmt.Errorf("wasmclass: compile: stopped after %v: %w: %w (Options.CompileTimeout is %v)",
			time.Since(start).Round(time.Millisecond), ctx.Err(), ErrCompile, opts.CompileTimeout)
	case err == nil:
		return maxRSS, nil
	}
	msg := strings.TrimSpace(stderr.String())
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == childExitError {
		return maxRSS, fmt.Errorf("wasmclass: compile: %s: %w", msg, ErrInvalidModule)
	}
	if msg == "" {
		msg = err.Error()
	}
	return maxRSS, fmt.Errorf("wasmclass: compile child: %s: %w (out of memory? Options.CompileMemory is %d bytes)", firstLine(msg), ErrCompile, opts.CompileMemory)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i])
	}
	return s
}

type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.n -= k
		l.w.Write(p[:k])
	}
	return len(p), nil
}

// RunCompileChild makes the running program serve as a compile child when
// the environment asks it to (Options.CompileInChild re-executes the
// program that way), and returns at once otherwise. Call it first thing in
// main, and in TestMain of tests that load with CompileInChild:
//
//	func main() {
//		wasmclass.RunCompileChild()
//		...
//	}
//
// In a child it never returns: it compiles the module read from stdin
// into the file cache and exits (0: compiled; 3: invalid module; other:
// out of memory or killed).
func RunCompileChild() {
	dir := os.Getenv(childEnv)
	if dir == "" {
		return
	}
	os.Exit(compileChild(dir))
}

func compileChild(dir string) int {
	memLimit, _ := strconv.ParseUint(os.Getenv(childMemoryEnv), 10, 64)
	pages, _ := strconv.ParseUint(os.Getenv(childPagesEnv), 10, 32)
	if memLimit > 0 {
		if err := limitAddressSpace(memLimit); err != nil {
			fmt.Fprintf(os.Stderr, "address space limit: %v\n", err)
			return 1
		}
		debug.SetMemoryLimit(int64(memLimit / 2))
	}
	bin, err := io.ReadAll(io.LimitReader(os.Stdin, 1<<30))
	if err != nil {
		fmt.Fprintf(os.Stderr, "read module: %v\n", err)
		return 1
	}
	ctx := context.Background()
	cache, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cache: %v\n", err)
		return 1
	}
	rt := wazero.NewRuntimeWithConfig(ctx, runtimeConfig(uint32(pages)).WithCompilationCache(cache))
	if _, err := rt.CompileModule(ctx, bin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return childExitError
	}
	_ = rt.Close(ctx)
	return 0
}
