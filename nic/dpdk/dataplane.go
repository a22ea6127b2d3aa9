//go:build linux && cgo && dpdk

package dpdk

/*
#cgo pkg-config: libdpdk
#cgo LDFLAGS: -lrte_net_ring -lrte_bus_vdev
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include "psp_dpdk.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/persephone-go/psp/nic"
)

// Available reports whether this build has the DPDK dataplane.
const Available = true

// Dataplane is a nic.Dataplane over one DPDK port. See the package
// documentation for its threads and buffer ownership.
type Dataplane struct {
	cfg   Config
	port  *C.struct_psp_port
	burst int
	mac   [6]byte
	mtu   int
	epoch time.Time

	// device is the hot-plugged virtual device to remove at Close ("" when
	// the port came from the EAL arguments).
	device       string
	workerQueues int // device TX queues for workers
	// onClose runs on the EAL thread after the port stops (ring pairs).
	onClose func()

	rxDescs []C.struct_psp_rx_desc // C memory, burst long
	buffers []nic.Buffer           // one per mbuf, by pool index
	// replyDescs are AllocReply's descriptors, by the request's pool
	// index (only the goroutine holding a request uses its entry). C
	// memory, freed with the pool.
	replyDescs []C.struct_psp_rx_desc
	txqs       []*txQueue

	// mu orders the I/O paths (read-locked) against Close (write-locked).
	mu          sync.RWMutex
	closed      atomic.Bool
	outstanding atomic.Int64 // buffers handed out by Recv, not yet sent or released
	reserved    int          // buffers the device rings and bursts may hold
	poolFreed   atomic.Bool
	final       PortStats // the counters when Close stopped the port

	releaseMu sync.Mutex
	scratch   []C.uintptr_t // C memory, burst long, under releaseMu

	rxPackets atomic.Uint64
}

var _ nic.Dataplane = (*Dataplane)(nil)

// start returns cfg with its defaults, once valid and with the EAL
// started.
func (c Config) start() (Config, error) {
	c = c.withDefaults()
	if err := c.validate(); err != nil {
		return c, err
	}
	return c, eal.start(c.EAL)
}

// Open initialises the EAL if this process has not yet, creates cfg.Device
// if set, and starts the port with one RX queue for the net worker and one
// TX queue per worker plus one for the net worker's ARP replies.
//
// # Errors
//
// Configuration errors wrap ErrConfig; EAL failures wrap ErrEAL; port set-up
// failures carry DPDK's reason.
func Open(cfg Config) (*Dataplane, error) {
	cfg, err := cfg.start()
	if err != nil {
		return nil, err
	}
	var (
		portID  = cfg.PortID
		device  string
		openErr error
	)
	if cfg.Device != "" {
		name, args, _ := strings.Cut(cfg.Device, ",")
		eal.do(func() {
			cname, cargs := C.CString(name), C.CString(args)
			defer C.free(unsafe.Pointer(cname))
			defer C.free(unsafe.Pointer(cargs))
			errbuf := newCErr()
			defer errbuf.free()
			id := C.psp_vdev_add(cname, cargs, errbuf.p, errbuf.n)
			if id < 0 {
				openErr = fmt.Errorf("dpdk: create device %q: %s (is its driver installed? e.g. net_tap, net_ring, net_null)", cfg.Device, errbuf)
				return
			}
			portID = uint16(id)
		})
		if openErr != nil {
			return nil, openErr
		}
		device = name
	}
	d, err := openPort(cfg, portID, device)
	if err != nil && device != "" {
		eal.do(func() { removeDevice(device) })
	}
	return d, err
}

func removeDevice(name string) {
	cname := C.CString(name)
	C.psp_vdev_remove(cname)
	C.free(unsafe.Pointer(cname))
}

// openPort starts portID; device is removed at Close when not empty.
func openPort(cfg Config, portID uint16, device string) (*Dataplane, error) {
	var (
		port         *C.struct_psp_port
		workerQueues int
		err          error
	)
	eal.do(func() {
		conf := (*C.struct_psp_port_conf)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_psp_port_conf{}))))
		defer C.free(unsafe.Pointer(conf))
		conf.port_id = C.uint16_t(portID)
		conf.workers = C.uint16_t(cfg.Workers)
		conf.burst = C.uint16_t(cfg.BurstSize)
		conf.rx_desc = C.uint16_t(cfg.RxDescriptors)
		conf.tx_desc = C.uint16_t(cfg.TxDescriptors)
		conf.pool_size = C.uint32_t(cfg.PoolSize)
		ip := cfg.IP.Unmap().As4()
		for i := range ip {
			conf.ip[i] = C.uint8_t(ip[i])
		}
		name := eal.name("psp_pool_")
		for i := 0; i < len(name) && i < len(conf.pool_name)-1; i++ {
			conf.pool_name[i] = C.char(name[i])
		}
		errbuf := newCErr()
		defer errbuf.free()
		if rc := C.psp_port_open(conf, errbuf.p, errbuf.n); rc != 0 {
			hint := ""
			if rc == -C.ENODEV {
				hint = " (pass --vdev in the EAL arguments, set Config.Device, or bind a NIC to vfio-pci)"
			}
			err = fmt.Errorf("dpdk: open port %d: %s%s", portID, errbuf, hint)
			return
		}
		port = conf.port
		workerQueues = int(conf.worker_queues)
		C.psp_port_serve_udp(port, C.uint16_t(cfg.Port))
		for _, p := range cfg.ExtraPorts {
			C.psp_port_serve_udp(port, C.uint16_t(p))
		}
	})
	if err != nil {
		return nil, err
	}
	d := &Dataplane{
		cfg:    cfg,
		port:   port,
		burst:  cfg.BurstSize,
		mtu:    int(C.psp_port_mtu(port)),
		epoch:  time.Now(),
		device: device,
	}
	mac := uint64(C.psp_port_mac(port))
	for i := range d.mac {
		d.mac[i] = byte(mac >> (8 * i))
	}
	d.rxDescs = unsafe.Slice(C.psp_port_rx_descs(port), d.burst)
	d.scratch = unsafe.Slice(C.psp_port_scratch(port), d.burst)
	d.buffers = make([]nic.Buffer, int(C.psp_port_pool_size(port)))
	d.reserved = int(C.psp_port_reserved(port))
	d.replyDescs = unsafe.Slice((*C.struct_psp_rx_desc)(C.calloc(C.size_t(len(d.buffers)), C.size_t(unsafe.Sizeof(C.struct_psp_rx_desc{})))), len(d.buffers))
	// Worker w transmits on device queue w % workerQueues; workers sharing a
	// queue share a lock.
	var locks []*sync.Mutex
	if workerQueues < cfg.Workers {
		locks = make([]*sync.Mutex, workerQueues)
		for i := range locks {
			locks[i] = new(sync.Mutex)
		}
	}
	d.txqs = make([]*txQueue, cfg.Workers)
	for w := range d.txqs {
		q := w % workerQueues
		d.txqs[w] = &txQueue{
			d:     d,
			id:    C.uint16_t(q),
			descs: unsafe.Slice(C.psp_port_tx_descs(port, C.uint16_t(q)), d.burst),
		}
		if locks != nil {
			d.txqs[w].shared = locks[q]
		}
	}
	d.workerQueues = workerQueues
	return d, nil
}

// MAC returns the port's Ethernet address.
func (d *Dataplane) MAC() [6]byte { return d.mac }

// IP returns the IPv4 address the dataplane answers for.
func (d *Dataplane) IP() netip.Addr { return d.cfg.IP.Unmap() }

// MTU returns the port's MTU: replies carry at most MTU-28 payload bytes.
func (d *Dataplane) MTU() int { return d.mtu }

// Workers returns the number of workers (TX queues as seen by callers).
func (d *Dataplane) Workers() int { return d.cfg.Workers }

// DeviceTxQueues returns how many device TX queues the workers use: fewer
// than Workers when the device has fewer queues (net_tap: at most 3), in
// which case workers share them under a lock.
func (d *Dataplane) DeviceTxQueues() int { return d.workerQueues }

// Now returns nanoseconds since Open on the monotonic clock.
func (d *Dataplane) Now() int64 { return int64(time.Since(d.epoch)) }

// Recv polls the port for up to min(len(bufs), BurstSize) UDP requests: one
// call into C per poll, which also answers ARP and drops (and counts)
// everything else. It waits at most wait for the first request, backing off
// from yielding to sleeping, so an idle net worker leaves its core to
// others. Only the net worker may call it.
//
// Each returned buffer's Data points into its mbuf: it is valid until the
// buffer is sent or released.
func (d *Dataplane) Recv(bufs []*nic.Buffer, wait time.Duration) (int, error) {
	limit := min(len(bufs), d.burst)
	if limit == 0 {
		return 0, nil
	}
	var deadline time.Time
	for idle := 0; ; idle++ {
		d.mu.RLock()
		if d.closed.Load() {
			d.mu.RUnlock()
			return 0, nic.ErrClosed
		}
		n := int(C.psp_rx(d.port, C.uint16_t(limit)))
		d.mu.RUnlock()
		if n > 0 {
			d.deliver(bufs[:n])
			return n, nil
		}
		if wait <= 0 {
			return 0, nil
		}
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(wait)
		} else if !now.Before(deadline) {
			return 0, nil
		}
		backOff(idle, deadline.Sub(now))
	}
}

// backOff idles a polling loop: yield first, then sleep longer and longer
// (up to 1 ms), never past left.
func backOff(idle int, left time.Duration) {
	const yields = 16
	if idle < yields {
		runtime.Gosched()
		return
	}
	sleep := time.Duration(10*(1<<min(idle-yields, 7))) * time.Microsecond
	time.Sleep(min(sleep, left, time.Millisecond))
}

func (d *Dataplane) deliver(bufs []*nic.Buffer) {
	now := d.Now()
	for i := range bufs {
		r := &d.rxDescs[i]
		b := &d.buffers[r.index]
		b.Data = unsafe.Slice((*byte)(unsafe.Pointer(r.payload)), int(r.room))
		b.Len = int(r.len)
		b.WireLen = b.Len
		b.Peer = netip.AddrPortFrom(netip.AddrFrom4(*(*[4]byte)(unsafe.Pointer(&r.peer_ip))), uint16(r.peer_port))
		b.DstPort = uint16(r.dst_port)
		b.RxTime = now
		b.Ref = uintptr(r.mbuf)
		b.Index = int32(r.index)
		bufs[i] = b
	}
	d.outstanding.Add(int64(len(bufs)))
	d.rxPackets.Add(uint64(len(bufs)))
}

// TxQueue returns worker w's transmit queue (w in 0..Workers-1), or nil
// when w is out of range.
func (d *Dataplane) TxQueue(w int) nic.TxQueue {
	if w < 0 || w >= d.cfg.Workers {
		return nil
	}
	return d.txqs[w]
}

// Release returns buffers to the pool without transmitting them. Any
// goroutine may call it.
func (d *Dataplane) Release(bufs ...*nic.Buffer) {
	if len(bufs) == 0 {
		return
	}
	if d.poolFreed.Load() {
		return // closed with every buffer back: these were released already
	}
	freed := 0
	d.mu.RLock()
	d.releaseMu.Lock()
	for start := 0; start < len(bufs); start += d.burst {
		k := 0
		for _, b := range bufs[start:min(start+d.burst, len(bufs))] {
			if b.Ref == 0 {
				continue // already sent or released
			}
			d.scratch[k] = C.uintptr_t(b.Ref)
			k++
			forget(b)
		}
		if k > 0 {
			C.psp_free_scratch(d.port, C.uint16_t(k))
			freed += k
		}
	}
	d.releaseMu.Unlock()
	d.mu.RUnlock()
	d.returned(freed)
}

// forget clears what pointed into the mbuf, so a stale buffer cannot write
// into memory the pool has taken back.
func forget(b *nic.Buffer) {
	b.Data = nil
	b.Len = 0
	b.Ref = 0
}

// returned accounts for n buffers back in the pool and frees the pool when
// the dataplane is closed and nothing is outstanding any more.
func (d *Dataplane) returned(n int) {
	if d.outstanding.Add(-int64(n)) == 0 && d.closed.Load() {
		d.freePool()
	}
}

func (d *Dataplane) freePool() {
	if d.poolFreed.CompareAndSwap(false, true) {
		C.psp_port_free(d.port)
		C.free(unsafe.Pointer(unsafe.SliceData(d.replyDescs)))
		d.replyDescs = nil
	}
}

// RequestBuffers implements nic.BufferPool: the mbuf pool minus what the
// device's descriptor rings and the bursts may hold.
func (d *Dataplane) RequestBuffers() int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed.Load() {
		return int(d.final.PoolSize) - d.reserved
	}
	return int(C.psp_port_pool_size(d.port)) - d.reserved
}

// AllocReply implements nic.ReplyAllocator: an mbuf holding req's headers,
// so that TxQueue.Send turns it into a further reply datagram to req's
// peer, or nil when the pool is empty or the dataplane closed. Any worker
// may call it for the request it holds; one call into C.
func (d *Dataplane) AllocReply(req *nic.Buffer) *nic.Buffer {
	if req.Ref == 0 || int(req.Index) < 0 || int(req.Index) >= len(d.buffers) {
		return nil
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed.Load() {
		return nil
	}
	r := &d.replyDescs[req.Index]
	if C.psp_alloc_reply(d.port, C.uintptr_t(req.Ref), r) != 0 {
		return nil
	}
	b := &d.buffers[r.index]
	b.Data = unsafe.Slice((*byte)(unsafe.Pointer(r.payload)), int(r.room))
	b.Len = 0
	b.WireLen = 0
	b.Peer = req.Peer
	b.DstPort = req.DstPort
	b.RxTime = req.RxTime
	b.Ref = uintptr(r.mbuf)
	b.Index = int32(r.index)
	d.outstanding.Add(1)
	return b
}

// Stats returns the nic counters. RxDropped counts every packet the port
// received and did not deliver (ARP requests included, answered or not) and
// the packets the device dropped; RxNoBuffer the device's failed mbuf
// allocations (rx_nombuf).
func (d *Dataplane) Stats() nic.Stats {
	ps := d.PortStats()
	s := nic.Stats{RxPackets: d.rxPackets.Load(), RxDropped: ps.Dropped(), RxNoBuffer: ps.NoBuffer}
	for _, q := range d.txqs {
		s.TxPackets += q.sent.Load()
		s.TxErrors += q.errors.Load()
	}
	return s
}

// PortStats returns the DPDK-specific counters: drops by reason, ARP
// replies, pool use. After Close it returns the counters as they were when
// the port stopped.
func (d *Dataplane) PortStats() PortStats {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed.Load() {
		return d.final
	}
	return d.portStats()
}

// portStats reads the counters; the port must be open.
func (d *Dataplane) portStats() PortStats {
	var s PortStats
	for r := range s.Drops {
		s.Drops[r] = uint64(C.psp_port_counter(d.port, C.int(r)))
	}
	s.DeviceDrops = uint64(C.psp_port_device_drops(d.port))
	s.Polled = uint64(C.psp_port_counter(d.port, C.PSP_CTR_RX_POLLED))
	s.Delivered = uint64(C.psp_port_counter(d.port, C.PSP_CTR_RX_DELIVERED))
	s.ARPReplies = uint64(C.psp_port_counter(d.port, C.PSP_CTR_ARP_REPLIES))
	s.ARPErrors = uint64(C.psp_port_counter(d.port, C.PSP_CTR_ARP_TX_ERRORS))
	s.PoolInUse = uint64(C.psp_pool_in_use(d.port))
	s.PoolSize = uint64(C.psp_port_pool_size(d.port))
	s.NoBuffer = uint64(C.psp_port_rx_nombuf(d.port))
	return s
}

// Outstanding returns the number of buffers handed out by Recv and not yet
// sent or released.
func (d *Dataplane) Outstanding() int { return int(d.outstanding.Load()) }

// Close stops the port (pending and later Recv calls return nic.ErrClosed)
// and removes the device it created. The buffer pool is freed once every
// buffer handed out has been sent or released (Send after Close releases
// without transmitting). Close is idempotent.
func (d *Dataplane) Close() error {
	d.mu.Lock()
	if d.closed.Load() {
		d.mu.Unlock()
		return nil
	}
	d.final = d.portStats()
	d.closed.Store(true)
	eal.do(func() {
		C.psp_port_stop(d.port)
		if d.onClose != nil {
			d.onClose()
		}
		if d.device != "" {
			removeDevice(d.device)
		}
	})
	d.mu.Unlock()
	if d.outstanding.Load() == 0 {
		d.freePool()
	}
	return nil
}

// Ports returns the UDP ports served, Config.Port's first.
func (d *Dataplane) Ports() []uint16 {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return append([]uint16{d.cfg.Port}, d.cfg.ExtraPorts...)
}

// AddPort serves UDP port as well (a tenant on a port of its own). Safe
// while the dataplane runs.
func (d *Dataplane) AddPort(port uint16) error {
	if port == 0 {
		return fmt.Errorf("%w: UDP port 0 cannot be served", ErrConfig)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		return fmt.Errorf("dpdk: add port %d: %w", port, nic.ErrClosed)
	}
	if port == d.cfg.Port || slices.Contains(d.cfg.ExtraPorts, port) {
		return nil
	}
	C.psp_port_serve_udp(d.port, C.uint16_t(port))
	d.cfg.ExtraPorts = append(slices.Clip(d.cfg.ExtraPorts), port)
	return nil
}

// RemovePort stops serving UDP port (not Config.Port): its packets are
// dropped as other-port from then on. Safe while the dataplane runs.
func (d *Dataplane) RemovePort(port uint16) error {
	if port == d.cfg.Port {
		return fmt.Errorf("dpdk: remove port %d: it is the configured port", port)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	i := slices.Index(d.cfg.ExtraPorts, port)
	if i < 0 || d.closed.Load() {
		return nil
	}
	C.psp_port_unserve_udp(d.port, C.uint16_t(port))
	d.cfg.ExtraPorts = slices.Delete(slices.Clone(d.cfg.ExtraPorts), i, i+1)
	return nil
}

// rawTransmit sends one Ethernet frame on the net worker's TX queue
// (diagnostics and tests). Only the net worker may call it.
func (d *Dataplane) rawTransmit(frame []byte) error {
	if len(frame) == 0 || len(frame) > 0xffff {
		return fmt.Errorf("dpdk: raw transmit: frame of %d bytes", len(frame))
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed.Load() {
		return nic.ErrClosed
	}
	cframe := C.CBytes(frame)
	defer C.free(cframe)
	if rc := C.psp_tx_raw(d.port, (*C.uint8_t)(cframe), C.uint16_t(len(frame))); rc != 0 {
		return fmt.Errorf("dpdk: raw transmit: %w", errnoError(rc))
	}
	return nil
}

// Circulate transmits each payload as a UDP request from the dataplane's
// own address and Config.Port to itself, on the net worker's TX queue. On a
// loopback device (net_ring, which returns every TX queue's packets to an RX
// queue) such a request comes back as a request, and so does its reply: the
// payloads circulate through the whole server (receive, classify, schedule,
// serve, transmit) until it stops. It is a closed-loop load for benchmarks
// of a server over DPDK without a load generator. On other devices the
// packets leave towards the wire (or the kernel, on net_tap).
//
// Call it before the net worker starts, or from the net worker.
func (d *Dataplane) Circulate(payloads [][]byte) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed.Load() {
		return nic.ErrClosed
	}
	for i, p := range payloads {
		if len(p) > d.mtu-28 {
			return fmt.Errorf("dpdk: circulate: payload %d has %d bytes, the MTU allows %d", i, len(p), d.mtu-28)
		}
		cp := C.CBytes(p)
		rc := C.psp_tx_self(d.port, (*C.uint8_t)(cp), C.uint16_t(len(p)), C.uint16_t(d.cfg.Port))
		C.free(cp)
		if rc != 0 {
			return fmt.Errorf("dpdk: circulate: payload %d: %w", i, errnoError(rc))
		}
	}
	return nil
}

// txQueue is one worker's DPDK TX queue.
type txQueue struct {
	d      *Dataplane
	id     C.uint16_t
	descs  []C.struct_psp_tx_desc // C memory, burst long
	shared *sync.Mutex            // non-nil when workers share the device queue
	_      [64]byte               // keep the counters off the neighbours' lines
	sent   atomic.Uint64
	errors atomic.Uint64
}

// Send rewrites each buffer's request into its reply in place and
// transmits them, one call into C per burst, then returns the buffers to
// the pool. The reply goes to Buffer.Peer from the dataplane's IP and
// Buffer.DstPort, through the Ethernet address the request came from (the
// peer or its router); TTL, lengths and both checksums are rewritten.
// Buffers whose Len exceeds their Data, or whose Peer is not IPv4, are
// released and counted as errors; buffers already sent or released are
// ignored.
func (q *txQueue) Send(bufs []*nic.Buffer) (int, error) {
	d := q.d
	if len(bufs) == 0 {
		return 0, nil
	}
	d.mu.RLock()
	if d.closed.Load() {
		d.mu.RUnlock()
		d.Release(bufs...)
		return 0, nic.ErrClosed
	}
	if q.shared != nil {
		q.shared.Lock()
	}
	sent, taken := 0, 0
	for start := 0; start < len(bufs); start += d.burst {
		k := 0
		for _, b := range bufs[start:min(start+d.burst, len(bufs))] {
			if b.Ref == 0 {
				continue // already sent or released
			}
			desc := &q.descs[k]
			k++
			desc.mbuf = C.uintptr_t(b.Ref)
			peer := b.Peer.Addr().Unmap()
			if b.Len < 0 || b.Len > len(b.Data) || !peer.Is4() {
				desc.len = C.PSP_TX_DROP
			} else {
				desc.len = C.uint16_t(b.Len)
				*(*[4]byte)(unsafe.Pointer(&desc.peer_ip)) = peer.As4()
				desc.peer_port = C.uint16_t(b.Peer.Port())
				desc.src_port = C.uint16_t(b.DstPort)
			}
			forget(b)
		}
		sent += int(C.psp_tx(d.port, q.id, C.uint16_t(k)))
		taken += k
	}
	if q.shared != nil {
		q.shared.Unlock()
	}
	d.mu.RUnlock()
	q.sent.Add(uint64(sent))
	if failed := len(bufs) - sent; failed > 0 {
		q.errors.Add(uint64(failed))
	}
	d.returned(taken)
	return sent, nil
}

// errnoError turns a negative errno from C into an error.
func errnoError(rc C.int) error {
	if rc >= 0 {
		return nil
	}
	return errors.New(C.GoString(C.strerror(-rc)))
}
