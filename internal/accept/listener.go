package accept

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Listener is a net.Listener whose Accept retries the errors Classify
// finds temporary (pausing after Exhausted ones; Close ends a pause) and
// holds at most a cap of connections open at once: past it a new
// connection is accepted and closed at once, counted as refused, so that
// the listen backlog never fills with connections nobody will serve.
// With a share per source (SetPerSource), one client address cannot hold
// all of them. Accept returns only net.ErrClosed (after Close) or a fatal
// error.
type Listener struct {
	net.Listener
	loop      *Loop
	maxConn   int64
	open      atomic.Int64
	perSource int

	mu sync.Mutex
	// capped: refusing since the cap was reached (logged once per run).
	capped bool
	// bySource counts the open connections of each source (see Source)
	// with a share.
	bySource map[netip.Addr]int

	done      chan struct{}
	closeOnce sync.Once
}

// NewListener wraps ln: its accept errors go through loop, and at most
// maxConns connections (0: no cap) it returned are open at once.
func NewListener(ln net.Listener, loop *Loop, maxConns int) *Listener {
	return &Listener{Listener: ln, loop: loop, maxConn: int64(maxConns), done: make(chan struct{}), bySource: map[netip.Addr]int{}}
}

// SetPerSource bounds the connections one source (an IPv4 address, an
// IPv6 /64; loopback addresses are not bounded: a local client could
// exhaust the process's descriptors in any case) may hold open at once:
// past it its new connections are refused, counted as the cap's are. It
// must be called before the first Accept; 0 (the default): no bound.
func (l *Listener) SetPerSource(n int) { l.perSource = n }

// PerSource returns the bound of SetPerSource.
func (l *Listener) PerSource() int { return l.perSource }

// Source is the part of a client's address its connections are counted
// by: its IP (an IPv4-mapped one as IPv4), or an IPv6 address's /64. ok is
// false for a loopback address or one that is not IP.
func Source(remote net.Addr) (src netip.Addr, ok bool) {
	ta, isTCP := remote.(*net.TCPAddr)
	if !isTCP {
		return src, false
	}
	a := ta.AddrPort().Addr().Unmap()
	if !a.IsValid() || a.IsLoopback() {
		return src, false
	}
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr(), true
	}
	return a, true
}

// admitSource counts a connection of src under its share, or reports
// that the share is full.
func (l *Listener) admitSource(src netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bySource[src] >= l.perSource {
		return false
	}
	l.bySource[src]++
	return true
}

// releaseSource uncounts a connection of src.
func (l *Listener) releaseSource(src netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bySource[src]--; l.bySource[src] <= 0 {
		delete(l.bySource, src)
	}
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
		src, counted := Source(c.RemoteAddr())
		if counted = counted && l.perSource > 0; counted && !l.admitSource(src) {
			l.open.Add(-1)
			l.loop.Refused()
			c.Close()
			continue
		}
		return &conn{Conn: c, l: l, src: src, counted: counted}, nil
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
	l       *Listener
	src     netip.Addr
	counted bool // under its source's share
	closed  atomic.Bool
}

func (c *conn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.open.Add(-1)
		if c.counted {
			c.l.releaseSource(c.src)
		}
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
