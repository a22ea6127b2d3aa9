//go:build linux

package udp

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/persephone-go/psp/nic"
)

// TxQueue implements nic.Dataplane.
func (d *Dataplane) TxQueue(w int) nic.TxQueue {
	if w < 0 || w >= len(d.tx) {
		return nil
	}
	return d.tx[w]
}

// AllocReply implements nic.ReplyAllocator: a free pool buffer addressed to
// req's peer, or nil when the pool is empty (or the dataplane is closed).
func (d *Dataplane) AllocReply(req *nic.Buffer) *nic.Buffer {
	if d.closed.Load() {
		return nil
	}
	b := d.pool.Get()
	if b == nil {
		return nil
	}
	b.Peer, b.DstPort, b.RxTime = req.Peer, req.DstPort, req.RxTime
	return b
}

// txQueue is one worker's transmit queue on its own descriptor (one per
// port: a reply leaves from the port its request came to).
type txQueue struct {
	d     *Dataplane
	conn  socket
	raw   syscall.RawConn
	socks atomic.Pointer[[]*txSock] // every port's, Addr's first
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names [][sockaddrLen]byte
	call  func(fd uintptr) bool

	n, off, sent, failed int
	firstErr             syscall.Errno

	txPackets atomic.Uint64
	txErrors  atomic.Uint64
	_         [64]byte // keep workers' counters off each other's cache lines
}

func newTxQueue(d *Dataplane, fd int) (*txQueue, error) {
	conn, err := d.txSocket(fd)
	if err != nil {
		return nil, err
	}
	q := &txQueue{d: d, conn: conn}
	if q.raw, err = q.conn.SyscallConn(); err != nil {
		q.conn.Close()
		return nil, err
	}
	q.socks.Store(&[]*txSock{{port: 0, conn: q.conn, raw: q.raw}})
	batch := d.cfg.Batch
	q.hdrs = make([]unix.Mmsghdr, batch)
	q.iovs = make([]unix.Iovec, batch)
	q.names = make([][sockaddrLen]byte, batch)
	for i := range q.hdrs {
		q.hdrs[i].Hdr.Iov = &q.iovs[i]
		q.hdrs[i].Hdr.SetIovlen(1)
		q.hdrs[i].Hdr.Name = &q.names[i][0]
	}
	q.call = q.sendmmsg
	return q, nil
}

// txSocket turns fd, a duplicate of a receive socket's descriptor that
// the caller hands over, into a transmit queue's socket.
func (d *Dataplane) txSocket(fd int) (socket, error) {
	if d.cfg.KernelWait {
		return &unpolled{fd: fd}, nil
	}
	f := os.NewFile(uintptr(fd), "udp-tx")
	pc, err := net.FilePacketConn(f) // dups fd again
	f.Close()
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}

// Send implements nic.TxQueue. Datagrams that cannot be sent (an address
// of the other family, a kernel error) are counted in Stats.TxErrors; the
// first such error is returned. After Close it returns nic.ErrClosed.
func (q *txQueue) Send(bufs []*nic.Buffer) (int, error) {
	if socks := *q.socks.Load(); len(socks) > 1 {
		return q.sendPorts(bufs, socks)
	}
	return q.send(bufs, q.raw)
}

// sendPorts sends each buffer from the socket of its DstPort (Addr's when
// the port is not served any more): runs of one port at a time, reordering
// bufs (which Send owns).
func (q *txQueue) sendPorts(bufs []*nic.Buffer, socks []*txSock) (int, error) {
	total := 0
	var firstErr error
	for len(bufs) > 0 {
		port := bufs[0].DstPort
		k := 1
		for i := 1; i < len(bufs); i++ {
			if bufs[i].DstPort == port {
				bufs[i], bufs[k] = bufs[k], bufs[i]
				k++
			}
		}
		raw := q.raw
		for _, s := range socks[1:] {
			if s.port == port {
				raw = s.raw
			}
		}
		n, err := q.send(bufs[:k], raw)
		total += n
		if err != nil && firstErr == nil {
			firstErr = err
		}
		bufs = bufs[k:]
	}
	return total, firstErr
}

// send transmits bufs through the socket raw.
func (q *txQueue) send(bufs []*nic.Buffer, raw syscall.RawConn) (int, error) {
	d := q.d
	total, failed := 0, 0
	var firstErr error
	for len(bufs) > 0 {
		chunk := bufs[:min(len(bufs), len(q.hdrs))]
		bufs = bufs[len(chunk):]
		k := 0
		for _, b := range chunk {
			nl := encodeSockaddr(d.family, b.Peer, &q.names[k])
			if nl == 0 || b.Len < 0 || b.Len > len(b.Data) || len(b.Data) == 0 {
				failed++
				if firstErr == nil {
					firstErr = fmt.Errorf("udp: send to %v: bad peer or length %d", b.Peer, b.Len)
				}
				continue
			}
			q.iovs[k].Base = &b.Data[0]
			q.iovs[k].SetLen(b.Len)
			q.hdrs[k].Hdr.Namelen = uint32(nl)
			k++
		}
		q.n, q.off, q.sent, q.failed, q.firstErr = k, 0, 0, 0, 0
		var err error
		if k > 0 {
			err = raw.Write(q.call)
		}
		for i := range k {
			q.iovs[i].Base = nil // do not keep pool memory reachable from here
		}
		for _, b := range chunk {
			d.pool.Put(b)
		}
		total += q.sent
		failed += q.failed + (k - q.sent - q.failed) // unsent after an error
		switch {
		case err != nil && (errors.Is(err, net.ErrClosed) || d.closed.Load()):
			firstErr = nic.ErrClosed
		case err != nil && firstErr == nil:
			firstErr = fmt.Errorf("udp: send: %w", err)
		case q.firstErr != 0 && firstErr == nil:
			firstErr = fmt.Errorf("udp: sendmmsg: %w", q.firstErr)
		}
	}
	q.txPackets.Add(uint64(total))
	if failed > 0 {
		q.txErrors.Add(uint64(failed))
	}
	return total, firstErr
}

// sendmmsg runs inside RawConn.Write; returning false asks the poller to
// wait until the socket is writable.
func (q *txQueue) sendmmsg(fd uintptr) bool {
	for q.off < q.n {
		n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&q.hdrs[q.off])), uintptr(q.n-q.off),
			unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0:
			q.off += int(n)
			q.sent += int(n)
		case unix.EINTR:
		case unix.EAGAIN:
			return false
		default: // the datagram at q.off failed: count it and go on
			if q.firstErr == 0 {
				q.firstErr = e
			}
			q.failed++
			q.off++
		}
	}
	return true
}
