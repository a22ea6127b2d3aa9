package accept

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Listener is a net.Listener whose Accept retries the errors Classify
// finds temporary (pausing after Exhausted ones; Close ends a pause) and
// holds at most a cap of connections open at once: past it a new
// connection is accepted and closed at once, counted as refused, so that
// the listen backlog never fills with connections nobody will serve.
// Accept returns only net.ErrClosed (after Close) or a fatal error.
type Listener struct {
	net.Listener
	loop    *Loop
	maxConn int64
	open    atomic.Int64

	// capped: refusing since the cap was reached (logged once per run).
	mu     sync.Mutex
	capped bool

	done      chan struct{}
	closeOnce sync.Once
}

// NewListener wraps ln: its accept errors go through loop, and at most
// maxConns connections (0: no cap) it returned are open at once.
func NewListener(ln net.Listener, loop *Loop, maxConns int) *Listener {
	return &Listener{Listener: ln, loop: loop, maxConn: int64(maxConns), done: make(chan struct{})}
}

// Accept waits for the next connection under the cap.
func (l *Listener) Accept() (net.Conn, error) {
	var pause *time.Timer
	defer func() {
		if pause != nil {
			pause.Stop()
		}
	}()
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			select {
			case <-l.done:
				return nil, net.ErrClosed
			default:
			}
			wait, err := l.loop.Failed(err)
			if err != nil {
				return nil, err
			}
			if wait > 0 {
				if pause == nil {
					pause = time.NewTimer(wait)
				} else {
					pause.Reset(wait)
				}
				select {
				case <-pause.C:
				case <-l.done:
					return nil, net.ErrClosed
				}
			}
			continue
		}
		l.loop.Accepted()
		if l.maxConn > 0 && l.open.Add(1) > l.maxConn {
			l.open.Add(-1)
			l.loop.Refused()
			l.noteCap(true)
			c.Close()
			continue
		}
		if l.maxConn <= 0 {
			l.open.Add(1)
		} else if l.open.Load() <= l.maxConn*9/10 {
			l.noteCap(false)
		}
		return &conn{Conn: c, l: l}, nil
	}
}

// noteCap logs when the listener starts refusing connections at its cap
// and when it accepts again with a tenth of the cap free (not at every
// connection that ends under a flood).
func (l *Listener) noteCap(refusing bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.capped == refusing {
		return
	}
	l.capped = refusing
	if refusing {
		fmt.Fprintf(l.loop.log, "%s: %d connections open, the most allowed: closing new ones at once until one ends\n", l.loop.name, l.maxConn)
	} else {
		fmt.Fprintf(l.loop.log, "%s: accepting connections again (%d refused in all)\n", l.loop.name, l.loop.refused.Load())
	}
}

// Open returns how many connections Accept returned are open.
func (l *Listener) Open() int { return int(l.open.Load()) }

// MaxConns returns the cap (0: none).
func (l *Listener) MaxConns() int { return int(l.maxConn) }

// Loop returns the listener's accept loop (its counters).
func (l *Listener) Loop() *Loop { return l.loop }

// Close closes the listener and ends a pause in Accept.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// conn releases its place under the cap when closed (once).
type conn struct {
	net.Conn
	l      *Listener
	closed atomic.Bool
}

func (c *conn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.open.Add(-1)
	}
	return c.Conn.Close()
}

// CloseWrite half-closes the connection when the underlying one can
// (net/http uses it to end a response before closing).
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
