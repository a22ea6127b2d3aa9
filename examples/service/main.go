// Command service is a tiny text service behind psp: "echo <text>" answers
// the text, "primes <n>" counts the primes below n. Its Wasm classifier
// types the two, so DARC keeps echoes fast while counts run. Over UDP a
// request is a datagram; over TCP it is a line, cut by the service's own
// framer (lines), and each reply is a line.
//
//	go run ./examples/service -classifier examples/classifiers/c/textservice.wasm
//	go run ./examples/service -listen tcp://127.0.0.1:7000
package main

import (
	"bytes"
	"context"
	"flag"
	"log"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/server"
)

// handle answers one request in place; false drops it (no reply). A line
// from a TCP connection is always answered (the client reads one reply
// line per request line), "error" when there is nothing else to say.
func handle(_ int, _ app.Type, b *nic.Buffer) bool {
	stream := b.Flags&nic.FromStream != 0
	ok := answer(b, bytes.TrimRight(b.Payload(), "\r\n"))
	if !stream {
		return ok
	}
	if !ok {
		b.Len = copy(b.Data, "error")
	}
	if b.Len < len(b.Data) {
		b.Data[b.Len] = '\n'
		b.Len++
	}
	return true
}

// answer writes the reply to req into b.
func answer(b *nic.Buffer, req []byte) bool {
	cmd, arg, _ := bytes.Cut(req, []byte(" "))
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
	service := &server.Application{Name: "textservice", Handler: app.HandlerFunc(handle), Stream: lines{}}
	return server.New(ctx, cfg, server.Options{Application: service, Log: os.Stderr})
}

func main() {
	listen := flag.String("listen", "127.0.0.1:7000", "address: IP:PORT (UDP) or tcp://IP:PORT")
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

// lines is the service's protocol over TCP: one request per line.
type lines struct{}

// maxLine bounds a request line.
const maxLine = 4096

// NewConn implements nic.Protocol: lines keep no state per connection.
func (lines) NewConn(uint64, netip.AddrPort) nic.Framer { return lines{} }

// TooManyConns implements nic.Protocol.
func (lines) TooManyConns() []byte { return []byte("error: too many connections\n") }

// Frame implements nic.Framer: a line is a request; the service keeps no
// state, so every request may run beside the others (ReadOnly).
func (lines) Frame(in []byte, max int) nic.Frame {
	i := bytes.IndexByte(in, '\n')
	switch {
	case i >= 0 && i < maxLine:
		return nic.Frame{Kind: nic.FrameRequest, Len: i + 1, ReadOnly: true}
	case i >= 0 || len(in) >= min(maxLine, max):
		return nic.Frame{Kind: nic.FrameClose, Reply: []byte("error: line too long\n")}
	}
	return nic.Frame{Kind: nic.FrameMore}
}
