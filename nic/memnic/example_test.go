package memnic_test

import (
	"fmt"

	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/memnic"
	"github.com/persephone-go/psp/wire"
)

// A generator-mode dataplane synthesises psp requests from template headers
// (here two shorts for every long) and counts the replies.
func Example_generator() {
	dp := memnic.New(memnic.Config{Generator: &memnic.Generator{
		Headers: []wire.Header{
			{Type: wire.TypeShort, ServiceNs: 500},
			{Type: wire.TypeShort, ServiceNs: 500},
			{Type: wire.TypeLong, ServiceNs: 500_000},
		},
		Count: 4,
	}})
	defer dp.Close()

	bufs := make([]*nic.Buffer, 8)
	n, _ := dp.Recv(bufs, 0)
	for _, b := range bufs[:n] {
		h, _ := wire.Decode(b.Payload())
		fmt.Printf("id %d type %d service %dns\n", h.ID, h.Type, h.ServiceNs)
	}
	dp.TxQueue(0).Send(bufs[:n]) // a worker's replies
	fmt.Println("generated", dp.Generated(), "replied", dp.Replied())
	// Output:
	// id 1 type 1 service 500ns
	// id 2 type 1 service 500ns
	// id 3 type 2 service 500000ns
	// id 4 type 1 service 500ns
	// generated 4 replied 4
}
