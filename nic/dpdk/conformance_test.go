//go:build linux && cgo && dpdk

package dpdk

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/persephone-go/psp/nic/nictest"
	"github.com/persephone-go/psp/wire"
)

// TestConformance runs the nic conformance suite over a ring pair: the
// client injects Ethernet/IPv4/UDP frames and reads back the replies the
// dataplane transmits, checking their headers and checksums on the way.
func TestConformance(t *testing.T) {
	nictest.Run(t, func(t *testing.T, workers int) nictest.Target {
		r := openTestRingPair(t, Config{
			Workers:       workers,
			BurstSize:     8,
			RxDescriptors: 8,
			TxDescriptors: 8,
			PoolSize:      128,
		})
		var clientPort uint16 = 30000
		return nictest.Target{
			DP: r,
			Send: func(payload []byte) error {
				clientPort++
				return r.inject(udpFrame{
					dstMAC: r.MAC(), srcMAC: clientMAC,
					src:     netip.AddrPortFrom(clientIP, clientPort),
					dst:     netip.AddrPortFrom(serverIP, wire.DefaultPort),
					payload: payload,
				}.build())
			},
			Recv: func(timeout time.Duration) ([]byte, error) {
				deadline := time.Now().Add(timeout)
				for time.Now().Before(deadline) {
					frame, err := r.transmitted()
					if err != nil {
						return nil, err
					}
					if frame == nil {
						time.Sleep(100 * time.Microsecond)
						continue
					}
					p, err := parseUDP(frame)
					if err != nil {
						return nil, err
					}
					if p.src != netip.AddrPortFrom(serverIP, wire.DefaultPort) || p.dst.Addr() != clientIP {
						return nil, errors.New("reply with wrong addresses " + p.src.String() + " -> " + p.dst.String())
					}
					return p.payload, nil
				}
				return nil, errors.New("no reply")
			},
			FreeBuffers: func() int {
				ps := r.PortStats()
				return int(ps.PoolSize - ps.PoolInUse)
			},
			BufSize: 0, // datagrams longer than the MTU never arrive whole: no truncation
		}
	})
}
