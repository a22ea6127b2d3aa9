package server_test

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/memnic"
	"github.com/persephone-go/psp/server"
)

// A service of your own behind DARC: the handler answers each request in
// place, the Wasm classifier types requests for the policy. (The in-memory
// dataplane stands in for UDP here; a real service listens on an address.)
func ExampleNew_application() {
	app := &server.Application{
		Name: "upper",
		Handler: app.HandlerFunc(func(_ int, _ app.Type, b *nic.Buffer) bool {
			_, text, _ := bytes.Cut(b.Payload(), []byte(" "))
			b.Len = copy(b.Data, bytes.ToUpper(text))
			return true
		}),
	}
	cfg := server.Config{
		Dataplane:  server.DataplaneMemory,
		Workers:    2,
		Classifier: "../examples/classifiers/c/textservice.wasm", // echo: ECHO, primes: PRIMES
		Admin:      server.Admin{Addr: "off"},
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	srv, err := server.New(ctx, cfg, server.Options{Application: app})
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error)
	go func() { done <- srv.Run(ctx) }()

	dp := srv.Dataplane().(*memnic.Dataplane)
	dp.Inject([]byte("echo hello, psp"), netip.MustParseAddrPort("192.0.2.1:5000"))
	select {
	case r := <-dp.Replies():
		fmt.Printf("%s\n", r.Payload)
	case <-time.After(10 * time.Second):
		fmt.Println("no reply")
	}
	stop()
	fmt.Println(<-done)
	// Output:
	// HELLO, PSP
	// <nil>
}
