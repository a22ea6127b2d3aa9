//go:build !linux

package loadgen

import "net"

const stampRoom = 64

// enableRxStamps is not available outside Linux: replies are timed when
// the receiver reads them.
func enableRxStamps(*net.UDPConn) bool { return false }

func rxStamp([]byte) (int64, bool) { return 0, false }
