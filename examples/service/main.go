// Command service is a tiny UDP text service behind psp: "echo <text>"
// answers the text, "primes <n>" counts the primes below n. Its Wasm
// classifier types the two, so DARC keeps echoes fast while counts run.
//
//	go run ./examples/service -classifier examples/classifiers/c/textservice.wasm
package main

import (
	"bytes"
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/server"
)

// handle answers one request in place; false drops it (no reply).
func handle(_ int, _ app.Type, b *nic.Buffer) bool {
	cmd, arg, _ := bytes.Cut(b.Payload(), []byte(" "))
	switch string(cmd) {
	case "echo":
		b.Len = copy(b.Data, arg)
	case "primes":
		n, err := strconv.Atoi(string(bytes.TrimSpace(arg)))
		if err != nil || n < 0 || n > 10_000_000 {
			return false
		}
		count := 0
		for i := 2; i < n; i++ {
			prime := true
			for d := 2; d*d <= i && prime; d++ {
				prime = i%d != 0
			}
			if prime {
				count++
			}
		}
		b.Len = len(strconv.AppendInt(b.Data[:0], int64(count), 10))
	default:
		return false
	}
	return true
}

// serve runs the service until ctx is done.
func serve(ctx context.Context, cfg server.Config) (*server.Server, error) {
	service := &server.Application{Name: "textservice", Handler: app.HandlerFunc(handle)}
	return server.New(ctx, cfg, server.Options{Application: service, Log: os.Stderr})
}

func main() {
	listen := flag.String("listen", "127.0.0.1:7000", "UDP address")
	classifier := flag.String("classifier", "examples/classifiers/c/textservice.wasm", "Wasm classifier")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := serve(ctx, server.Config{Listen: *listen, Workers: 4, Classifier: *classifier, Admin: server.Admin{Addr: "off"}})
	if err != nil {
		log.Fatal(err)
	}
	if err := srv.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
