package wasmclass

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// child is a compile child seen in /proc.
type child struct {
	pid    int
	limits map[string]string // /proc/pid/limits: resource -> hard limit
}

// childWatcher samples /proc for this process's children running this
// executable (compile children): how many at once, and their limits.
type childWatcher struct {
	stop chan struct{}
	done sync.WaitGroup

	mu   sync.Mutex
	seen map[int]child
	peak int
}

func watchChildren(t *testing.T) *childWatcher {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	w := &childWatcher{stop: make(chan struct{}), seen: map[int]child{}}
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			pids := childrenOf(os.Getpid())
			w.mu.Lock()
			w.peak = max(w.peak, len(pids))
			for _, pid := range pids {
				// The last sample of a child is taken while it compiles;
				// a process that is exiting shows no limits.
				if l := readLimits(pid); l["Max open files"] != "" && isCompileChild(pid) {
					w.seen[pid] = child{pid: pid, limits: l}
				}
			}
			w.mu.Unlock()
			time.Sleep(200 * time.Microsecond)
		}
	}()
	t.Cleanup(w.close)
	return w
}

func (w *childWatcher) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.done.Wait()
}

// childrenOf returns the live (not zombie) children of ppid that run this
// executable.
func childrenOf(ppid int) []int {
	exe, _ := os.Executable()
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, state, ok := procParent(pid)
		if !ok || p != ppid || state == "Z" {
			continue
		}
		if target, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); target == exe {
			out = append(out, pid)
		}
	}
	return out
}

// isCompileChild reports whether pid was started as a compile child (not
// another process of this executable, such as a test's helper).
func isCompileChild(pid int) bool {
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	return err == nil && strings.Contains(string(env), "\x00"+childEnv+"=")
}

// procParent reads a process's parent and state from /proc/pid/stat.
func procParent(pid int) (ppid int, state string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, "", false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0], err == nil
}

// readLimits returns the hard limits in /proc/pid/limits, by resource.
func readLimits(pid int) map[string]string {
	f, err := os.Open(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 26 || strings.HasPrefix(line, "Limit") {
			continue
		}
		name := strings.TrimSpace(line[:26])
		if f := strings.Fields(line[26:]); len(f) >= 2 {
			out[name] = f[1]
		}
	}
	return out
}

// TestCompileChildLimits: a compile child runs under limits of address
// space, CPU time and open files, all in place while it compiles (the
// parent sets them before it sends the module).
func TestCompileChildLimits(t *testing.T) {
	w := watchChildren(t)
	ctx := context.Background()
	opts := Options{CompileInChild: true, CompileMemory: DefaultCompileMemory + 1<<20, CompileTimeout: 7 * time.Second}
	for range 3 {
		m, err := Load(ctx, fixture(t, "good"), opts)
		if err != nil {
			t.Fatal(err)
		}
		_ = m.Close(ctx)
	}
	w.close()
	if len(w.seen) == 0 {
		t.Fatal("no compile child seen")
	}
	want := map[string]string{
		"Max address space": strconv.Itoa(DefaultCompileMemory + 1<<20),
		"Max cpu time":      "7",
		"Max open files":    strconv.Itoa(childFiles),
	}
	for _, c := range w.seen {
		for res, v := range want {
			if got := c.limits[res]; got != v {
				t.Errorf("child %d: %s is %q, want %q", c.pid, res, got, v)
			}
		}
	}
	t.Logf("%d children seen, limits %v", len(w.seen), want)
}

// TestCompileChildCPULimit: the CPU limit kills a child whatever the
// wall-clock timeout (a parent that stopped watching cannot leave a
// compiler spinning).
func TestCompileChildCPULimit(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles for seconds")
	}
	// Twenty times the default bounds' br_tables: seconds of CPU to compile
	// (the child compiles what it is given), under a one-second limit and
	// no wall-clock timeout.
	bin := brTablesModule(20 * DefaultBounds.BrTableTotal / DefaultBounds.BrTable)
	var stderr strings.Builder
	cmd, stdin, err := startCompileChild(context.Background(), t.TempDir(), 64, childLimits{addressSpace: 2 << 30, cpuSeconds: 1, files: childFiles}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = stdin.Write(bin); _ = stdin.Close() }()
	start := time.Now()
	err = cmd.Wait()
	took := time.Since(start)
	var exit *exec.ExitError
	if err == nil {
		t.Skipf("compiled in %v, CPU %v, within the one-second limit: this machine is too fast for the test", took, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
	}
	if !errorsAs(err, &exit) || exit.ProcessState.String() != "signal: killed" {
		t.Errorf("child: %v (%s), want killed by the CPU limit", err, stderr.String())
	}
	t.Logf("child: %v after %v, CPU %v", err, took, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
}

func errorsAs(err error, target **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*target = e
	}
	return ok
}

// TestCompileConcurrencyBounded: however many hosts and modules load at
// once, no more compile children run at once than SetCompileConcurrency
// allows.
func TestCompileConcurrencyBounded(t *testing.T) {
	prev := SetCompileConcurrency(1)
	defer SetCompileConcurrency(prev)
	w := watchChildren(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for h := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 3 {
				host, err := NewHost(ctx, HostSpec{Name: fmt.Sprintf("h%dt%d", h, k), Wasm: fixture(t, "good"), Options: Options{CompileInChild: true}})
				if err != nil {
					errs <- err
					return
				}
				_ = host.Close(ctx)
			}
		}()
	}
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := Load(ctx, fixture(t, "const1"), Options{CompileInChild: true})
			if err != nil {
				errs <- err
				return
			}
			_ = m.Close(ctx)
		}()
	}
	wg.Wait()
	w.close()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(w.seen) < 3 {
		// Children live tens of milliseconds; a loaded machine may hide a
		// few from the sampler, not most.
		t.Errorf("saw %d children of 9 compilations: the watcher cannot judge", len(w.seen))
	}
	if w.peak > 1 {
		t.Errorf("%d compile children at once, the limit is 1", w.peak)
	}
	t.Logf("9 compilations, %d children seen, at most %d at once", len(w.seen), w.peak)
}

const orphanHelperEnv = "PSP_WASMCLASS_TEST_ORPHAN"

// orphanHelper is a process that starts a long compilation in a child,
// prints the child's pid and dies without waiting for it.
func orphanHelper() int {
	go func() {
		_, _ = Load(context.Background(), brTablesModule(8*DefaultBounds.BrTableTotal/DefaultBounds.BrTable), Options{CompileInChild: true, MaxModuleSize: 64 << 20, Bounds: Bounds{BrTableTotal: 1 << 30}})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if pids := childrenOf(os.Getpid()); len(pids) > 0 {
			time.Sleep(50 * time.Millisecond) // the module is on its way
			fmt.Println(pids[0])
			return 0
		}
		time.Sleep(time.Millisecond)
	}
	return 1
}

// TestCompileChildDiesWithParent: a compile child does not outlive the
// process that started it.
func TestCompileChildDiesWithParent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("parent-death signal: Linux")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), orphanHelperEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("helper printed %q", out)
	}
	died := time.Now()
	for time.Since(died) < 5*time.Second {
		if _, state, ok := procParent(pid); !ok || state == "Z" {
			t.Logf("the orphaned compile child %d was gone %v after its parent", pid, time.Since(died).Round(time.Millisecond))
			if time.Since(died) > time.Second/2 {
				t.Errorf("the child lived on for %v: it ended by itself, not with its parent", time.Since(died))
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = syscallKill(pid)
	t.Errorf("the compile child %d outlived its parent by 5 s", pid)
}

func syscallKill(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
