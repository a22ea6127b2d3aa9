package wasmclass

import (
	"sync"
	"time"
)

// watchdog enforces Options.TimeLimit without costing calls anything. The
// instrumented guest counts its calls from the host (a global the export
// wrappers increment) and spends fuel while it runs (the tank global). A
// goroutine per module samples both for every instance every TimeLimit/2:
// a call is over the limit when the call count stayed the same over three
// samples (the call began before the first) while the tank went down in
// each of the last two intervals (it ran through them). It is
// then stopped by emptying its tank: it traps at its next fuel check
// (every loop iteration and call has one), and the instance counts a
// FaultTime and disables the module.
//
// Compiled code cannot be interrupted, and the Go runtime cannot stop a
// goroutine running it for a garbage collection, which then stalls this
// watchdog with the rest of the process until the call ends. Functions
// that recurse or call indirectly exit to the host every fuel.SliceUnits
// units, where the runtime can stop the goroutine; loops in other
// functions do not (an exit in a loop costs more than the fuel checks), so
// a collection that starts during such a call waits for its fuel to run
// out, and so does the watchdog.
//
// An idle instance keeps both values, so it is never taken for a running
// call; a thread descheduled for a whole interval shows no fuel spent in
// it, so preemption alone does not trip the watchdog, and an interval in
// which the watchdog's own tick came late (the host starves the process)
// judges nobody.
type watchdog struct {
	m      *Module
	period time.Duration

	mu    sync.Mutex
	insts map[*Instance]*sample
	quit  chan struct{}
	wg    sync.WaitGroup
}

// sample is what the watchdog saw of an instance's current guest.
type sample struct {
	g       *guest
	calls   uint64
	tank    int64
	samples int // consecutive samples with the same call count
	running int // consecutive intervals in which the call spent fuel
}

func newWatchdog(m *Module, limit time.Duration) *watchdog {
	if limit <= 0 || m.opts.noFuel {
		return nil
	}
	return &watchdog{m: m, period: limit / 2, insts: map[*Instance]*sample{}}
}

func (w *watchdog) add(i *Instance) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.insts[i] = &sample{}
	if w.quit == nil {
		w.quit = make(chan struct{})
		w.wg.Add(1)
		go w.run(w.quit)
	}
}

func (w *watchdog) remove(i *Instance) {
	w.mu.Lock()
	delete(w.insts, i)
	w.mu.Unlock()
}

func (w *watchdog) stop() {
	w.mu.Lock()
	q := w.quit
	w.quit = nil
	w.mu.Unlock()
	if q != nil {
		close(q)
		w.wg.Wait()
	}
}

func (w *watchdog) run(quit chan struct{}) {
	defer w.wg.Done()
	t := time.NewTicker(w.period)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-quit:
			return
		case <-t.C:
		}
		now := time.Now()
		// A tick that comes late means the host is not giving this
		// process the CPU: a call that spans the interval may have been
		// descheduled rather than slow. Judge nobody on such an interval.
		starved := now.Sub(last) > w.period+w.period/2
		last = now
		w.mu.Lock()
		for i, s := range w.insts {
			if starved {
				*s = sample{}
				continue
			}
			w.check(i, s)
		}
		w.mu.Unlock()
	}
}

// killedTank is what the watchdog writes to a tank: negative, and far from
// overflowing when the guest subtracts its next charge.
const killedTank = uint64(1<<64 - 1<<62)

// killedBelow tells a tank the watchdog emptied from one a guest overdrew
// by its own charges.
const killedBelow = -(int64(1) << 61)

// check samples one instance and stops a call over the limit.
func (w *watchdog) check(i *Instance, s *sample) {
	g := i.cur.Load()
	if g == nil || g.tank == nil || g.calls == nil {
		*s = sample{}
		return
	}
	calls, tank := g.calls.Get(), int64(g.tank.Get())
	if g != s.g || calls != s.calls {
		*s = sample{g: g, calls: calls, tank: tank, samples: 1}
		return
	}
	if tank < s.tank {
		s.running++
	} else {
		s.running = 0
	}
	s.tank = tank
	s.samples++
	if s.running < 2 || s.samples < 3 {
		return
	}
	// Over the limit, and it ran (spent fuel) in each of the last two
	// intervals: stop it (repeatedly, until the call ends: the guest's own
	// update of the tank may overwrite one write). The instance disables
	// the module when the call traps on the emptied tank; a call that
	// ended first is let be.
	i.killMu.Lock()
	if i.cur.Load() == g && g.calls.Get() == calls {
		i.killed.Store(true)
		g.tank.Set(killedTank)
	}
	i.killMu.Unlock()
}
