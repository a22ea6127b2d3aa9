package wasmclass

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
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
	// Queued is the time spent waiting for a compile slot (see
	// SetCompileConcurrency), before Duration.
	Queued  time.Duration
	InChild bool
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
	queued := time.Now()
	unuse := func() {}
	if opts.shared != nil {
		// The host's cache stays open until this compilation is done
		// with it, in the background too once abandoned.
		var err error
		if unuse, err = opts.shared.use(); err != nil {
			return nil, fmt.Errorf("wasmclass: compile: %w", err)
		}
	}
	slot, err := compileSlots.acquire(ctx)
	if err != nil {
		unuse()
		return nil, fmt.Errorf("wasmclass: compile: waiting %v for one of the process's %d compile slots: %w: %w (SetCompileConcurrency)",
			time.Since(queued).Round(time.Millisecond), compileSlots.size(), err, ErrCompile)
	}
	release := func() { slot(); unuse() }
	// An in-process compilation that is abandoned keeps its slot and its
	// use of the cache until the compiler returns; compileBounded takes
	// the release over then.
	defer func() { release() }()
	ctx, cancel := context.WithTimeout(ctx, opts.CompileTimeout)
	defer cancel()
	start := time.Now()
	c := &compiledModule{cleanup: func() {}}
	c.stats.Queued = start.Sub(queued)
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
	if c.compiled, err = compileBounded(ctx, c.rt, bin, &release); err != nil {
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
// compilation finishes in the background and its runtime is closed then,
// and its compile slot and its use of the cache released (*release is
// taken over, replaced by a no-op).
func compileBounded(ctx context.Context, rt wazero.Runtime, bin []byte, release *func()) (wazero.CompiledModule, error) {
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
		rel := *release
		*release = func() {}
		go func() {
			<-done
			_ = rt.Close(context.Background())
			rel()
		}()
		return nil, ctx.Err()
	}
}

// Environment of the compile child.
const (
	childEnv       = "PSP_WASMCLASS_COMPILE_CACHE" // the file cache directory
	childMemoryEnv = "PSP_WASMCLASS_COMPILE_MEMORY"
	childPagesEnv  = "PSP_WASMCLASS_COMPILE_PAGES"
	childCPUEnv    = "PSP_WASMCLASS_COMPILE_CPU"    // seconds of CPU time
	childFilesEnv  = "PSP_WASMCLASS_COMPILE_FILES"  // open files
	childParentEnv = "PSP_WASMCLASS_COMPILE_PARENT" // the parent's pid
	childExitError = 3
	// childFiles bounds the compile child's open file descriptors: its
	// standard streams, the Go runtime's poller and the cache files it
	// writes one at a time.
	childFiles = 32
)

// childLimits are the resource limits of a compile child.
type childLimits struct {
	addressSpace uint64 // bytes; 0: none
	cpuSeconds   uint64
	files        uint64
}

func limitsFor(opts Options) childLimits {
	cpu := uint64((opts.CompileTimeout + time.Second - 1) / time.Second)
	return childLimits{addressSpace: opts.CompileMemory, cpuSeconds: max(cpu, 1), files: childFiles}
}

// startCompileChild starts the current executable as a compile child,
// under the limits l, and returns it with its standard input, to which
// the module is to be written. The parent sets l on the child (prlimit,
// where the system has it) before returning, so the child has its limits
// before it reads a byte of the module; the child checks them, and sets
// them itself where the parent cannot. The child is killed if the thread
// that started it (locked by the caller for the child's life) exits.
func startCompileChild(ctx context.Context, dir string, pages uint32, l childLimits, stderr io.Writer) (*exec.Cmd, io.WriteCloser, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(),
		childEnv+"="+dir,
		childMemoryEnv+"="+strconv.FormatUint(l.addressSpace, 10),
		childPagesEnv+"="+strconv.FormatUint(uint64(pages), 10),
		childCPUEnv+"="+strconv.FormatUint(l.cpuSeconds, 10),
		childFilesEnv+"="+strconv.FormatUint(l.files, 10),
		childParentEnv+"="+strconv.Itoa(os.Getpid()))
	cmd.SysProcAttr = childSysProcAttr()
	cmd.Stderr = &limitedWriter{w: stderr, n: 4096}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	if err := limitChild(cmd.Process.Pid, l); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, nil, fmt.Errorf("limit the child: %w", err)
	}
	return cmd, stdin, nil
}

// compileInChild runs the current executable as a compile child: it reads
// the module on stdin, compiles it into the file cache dir under limits of
// address space, CPU time and open files, and exits. It is killed when ctx
// is done, and when the thread that started it exits (the parent died).
func compileInChild(ctx context.Context, bin []byte, dir string, opts Options) (maxRSS int64, _ error) {
	// Pdeathsig fires when the thread that forked the child exits: keep
	// this one for the child's life.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := time.Now()
	var stderr bytes.Buffer
	cmd, stdin, err := startCompileChild(ctx, dir, opts.MemoryLimitPages, limitsFor(opts), &stderr)
	if err != nil {
		return 0, fmt.Errorf("wasmclass: compile child: %w: %w", err, ErrCompile)
	}
	// The module goes in only now, under the limits. A child that dies
	// early fails the write (EPIPE), which Wait reports better.
	go func() {
		_, _ = stdin.Write(bin)
		_ = stdin.Close()
	}()
	err = cmd.Wait()
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
	return maxRSS, fmt.Errorf("wasmclass: compile child: %s: %w (out of memory or CPU time? Options.CompileMemory is %d bytes, the CPU limit %d s)",
		firstLine(msg), ErrCompile, opts.CompileMemory, limitsFor(opts).cpuSeconds)
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
	env := func(name string) uint64 {
		v, _ := strconv.ParseUint(os.Getenv(name), 10, 64)
		return v
	}
	pages := env(childPagesEnv)
	l := childLimits{addressSpace: env(childMemoryEnv), cpuSeconds: env(childCPUEnv), files: env(childFilesEnv)}
	// The parent may have died between starting the child and the death
	// signal taking effect: then nobody waits for the compilation.
	if parent := env(childParentEnv); parent != 0 && uint64(os.Getppid()) != parent {
		fmt.Fprintf(os.Stderr, "parent %d is gone\n", parent)
		return 1
	}
	// The parent set the limits before sending the module (where it can);
	// set them again (lowering never fails) and fail if they are not there.
	if err := limitSelf(l); err != nil {
		fmt.Fprintf(os.Stderr, "resource limits: %v\n", err)
		return 1
	}
	if l.addressSpace > 0 {
		debug.SetMemoryLimit(int64(l.addressSpace / 2))
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
