package nictest

import (
	"time"

	"github.com/persephone-go/psp/nic"
)

// Echo sends every request dp receives back as its own reply, on the TX
// queues given taken in turn, until stop is closed or Recv fails (Close).
// Recv waits at most wait, which bounds how late stop is seen. Run it in a
// goroutine of its own.
func Echo(dp nic.Dataplane, stop <-chan struct{}, wait time.Duration, queues ...int) {
	bufs := make([]*nic.Buffer, 32)
	for q := 0; ; q = (q + 1) % len(queues) {
		select {
		case <-stop:
			return
		default:
		}
		n, err := dp.Recv(bufs, wait)
		if err != nil {
			return
		}
		if n > 0 {
			dp.TxQueue(queues[q]).Send(bufs[:n])
		}
	}
}
