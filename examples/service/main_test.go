package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/server"
)

// TestService runs the example on a free port and talks to it over UDP.
func TestService(t *testing.T) {
	srv := startService(t, "127.0.0.1:0")
	conn, err := net.Dial("udp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ask := func(req, want string) string {
		conn.Write([]byte(req))
		wait := 5 * time.Second
		if want == "no reply" {
			wait = 300 * time.Millisecond
		}
		conn.SetReadDeadline(time.Now().Add(wait))
		buf := make([]byte, 2048)
		n, err := conn.Read(buf)
		if err != nil {
			return "no reply"
		}
		return string(buf[:n])
	}
	for _, c := range []struct{ req, want string }{
		{"echo hello", "hello"},
		{"primes 100", "25"},
		{"primes x", "no reply"},
		{"nope", "no reply"},
	} {
		if got := ask(c.req, c.want); got != c.want {
			t.Errorf("%q: %q, want %q", c.req, got, c.want)
		}
	}
	time.Sleep(250 * time.Millisecond) // a stats interval
	types := map[string]uint64{}
	for _, ts := range srv.Status().Types {
		types[ts.Name] = ts.Received
	}
	// Type names are the tenant's ("default" for Config.Classifier).
	if types["default/ECHO"] != 1 || types["default/PRIMES"] != 2 || types["UNKNOWN"] != 1 {
		t.Errorf("the classifier typed %v, want 1 ECHO, 2 PRIMES, 1 UNKNOWN", types)
	}
}

// TestServiceOverTCP: the same service over TCP, a line per request,
// pipelined, replies in order; a line too long closes the connection.
func TestServiceOverTCP(t *testing.T) {
	srv := startService(t, "tcp://127.0.0.1:0")
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.Addr(), "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprint(conn, "primes 200000\necho hello\nnope\nprimes x\necho bye\n")
	got, err := io.ReadAll(io.LimitReader(conn, int64(len("17984\nhello\nerror\nerror\nbye\n"))))
	if err != nil || string(got) != "17984\nhello\nerror\nerror\nbye\n" {
		t.Fatalf("got %q, %v", got, err)
	}
	fmt.Fprint(conn, strings.Repeat("x", 5000))
	rest, _ := io.ReadAll(conn)
	if string(rest) != "error: line too long\n" {
		t.Fatalf("after a long line: %q", rest)
	}
}

// startService starts the example listening on listen; the test's end
// stops it.
func startService(t *testing.T, listen string) *server.Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := serve(ctx, server.Config{Listen: listen, Workers: 2, Admin: server.Admin{Addr: "off"},
		Classifier: filepath.Join("..", "classifiers", "c", "textservice.wasm")})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return srv
}
