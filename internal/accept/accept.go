package accept

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// Class says what an accept loop does after an error.
type Class uint8

// The classes of accept errors.
const (
	// Fatal: the listening socket is unusable (closed under the loop's
	// feet by another, not a socket, not listening): stop and report it.
	Fatal Class = iota
	// Closed: the listener was closed (net.ErrClosed): stop quietly.
	Closed
	// Aborted: one pending connection failed before it was accepted (the
	// peer reset it, or a network error accept(2) reports in its name):
	// accept the next one at once.
	Aborted
	// Exhausted: a resource ran out (file descriptors of the process or
	// of the system, socket buffers, kernel memory): wait, then retry;
	// the connection waits in the listen backlog meanwhile.
	Exhausted
)

func (c Class) String() string {
	switch c {
	case Closed:
		return "closed"
	case Aborted:
		return "aborted"
	case Exhausted:
		return "exhausted"
	}
	return "fatal"
}

// Classify returns the class of an error from accept(2) or
// net.Listener.Accept. EAGAIN is not an error of a non-blocking accept
// loop (there is nothing to accept: wait until the socket is readable);
// Classify calls it Aborted so that a loop handing it over by mistake
// goes on.
func Classify(err error) Class {
	if errors.Is(err, net.ErrClosed) {
		return Closed
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM:
			return Exhausted
		case syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR, syscall.EAGAIN,
			syscall.ETIMEDOUT, syscall.EPERM,
			// accept(2), Linux notes: network errors of the pending
			// connection, to be treated like EAGAIN.
			syscall.ENETDOWN, syscall.EPROTO, syscall.ENOPROTOOPT, syscall.EHOSTDOWN,
			syscall.EHOSTUNREACH, syscall.EOPNOTSUPP, syscall.ENETUNREACH:
			return Aborted
		}
		if abortedHere(errno) {
			return Aborted
		}
		return Fatal
	}
	if t, ok := err.(interface{ Temporary() bool }); ok && t.Temporary() {
		return Exhausted
	}
	return Fatal
}

// Default pauses after an Exhausted error: the first pause, doubled at
// each further error of a burst up to the longest (net/http's own).
const (
	DefaultMinPause = 5 * time.Millisecond
	DefaultMaxPause = time.Second
)

// Options configure a Loop; the zero value of each field is its default.
type Options struct {
	// Name names the loop in its log lines ("admin", "tcp 0.0.0.0:11211").
	Name string
	// Log receives the loop's lines (default: none).
	Log io.Writer
	// MinPause and MaxPause bound the pause after an Exhausted error
	// (defaults DefaultMinPause, DefaultMaxPause).
	MinPause, MaxPause time.Duration
}

// Counts are a loop's counters since it started.
type Counts struct {
	Accepted  uint64 // connections accepted
	Aborted   uint64 // Aborted errors, retried at once
	Exhausted uint64 // Exhausted errors, retried after a pause
	Bursts    uint64 // runs of Exhausted errors ended by an accept (or still going)
	Refused   uint64 // connections accepted and closed at once: a cap was reached (Listener)
}

// Loop is the retry state of one accept loop: call Failed after every
// failed accept and Accepted after every accepted connection.
type Loop struct {
	name     string
	log      io.Writer
	min, max time.Duration

	pause      time.Duration // the next Exhausted error's pause
	burst      uint64        // Exhausted errors since the last accept
	burstStart time.Time
	burstErr   error

	accepted, aborted, exhausted, bursts, refused atomic.Uint64
}

// NewLoop returns a Loop with o's settings.
func NewLoop(o Options) *Loop {
	l := &Loop{name: o.Name, log: o.Log, min: o.MinPause, max: o.MaxPause}
	if l.log == nil {
		l.log = io.Discard
	}
	if l.min <= 0 {
		l.min = DefaultMinPause
	}
	if l.max < l.min {
		l.max = max(DefaultMaxPause, l.min)
	}
	if l.name == "" {
		l.name = "accept"
	}
	return l
}

// Failed takes the error of a failed accept and says what to do: retry
// after pause (0: at once), or stop when err is not nil (errors.Is
// net.ErrClosed: the listener was closed; anything else is fatal and says
// so). The first Exhausted error of a burst is logged; the others are
// counted.
func (l *Loop) Failed(acceptErr error) (pause time.Duration, err error) {
	switch Classify(acceptErr) {
	case Closed:
		return 0, acceptErr
	case Aborted:
		l.aborted.Add(1)
		return 0, nil
	case Exhausted:
		l.exhausted.Add(1)
		if l.burst == 0 {
			l.bursts.Add(1)
			l.burstStart, l.burstErr, l.pause = time.Now(), acceptErr, l.min
			fmt.Fprintf(l.log, "%s: accept: %v: retrying after a pause growing from %v to %v until a connection is accepted (connections wait in the listen backlog)\n",
				l.name, acceptErr, l.min, l.max)
		}
		l.burst++
		pause = l.pause
		l.pause = min(2*l.pause, l.max)
		return pause, nil
	}
	return 0, fmt.Errorf("%s: accept: %w (the listening socket is unusable)", l.name, acceptErr)
}

// Accepted records an accepted connection; it ends a burst of errors
// (and logs how long it lasted).
func (l *Loop) Accepted() {
	l.accepted.Add(1)
	if l.burst == 0 {
		return
	}
	fmt.Fprintf(l.log, "%s: accept: recovered after %d errors in %v (%v)\n",
		l.name, l.burst, time.Since(l.burstStart).Round(time.Millisecond), l.burstErr)
	l.burst, l.burstErr = 0, nil
}

// Refused records a connection accepted and closed at once (a cap).
func (l *Loop) Refused() { l.refused.Add(1) }

// Counts returns the loop's counters. Safe from any goroutine.
func (l *Loop) Counts() Counts {
	return Counts{
		Accepted:  l.accepted.Load(),
		Aborted:   l.aborted.Load(),
		Exhausted: l.exhausted.Load(),
		Bursts:    l.bursts.Load(),
		Refused:   l.refused.Load(),
	}
}
