package testenv

import (
	"net"
	"sync"
	"testing"
)

// UDPServer answers each datagram on loopback with answer(request)
// (nothing when it returns nil) until stop, which waits for it to end:
// read what answer counts after stop. The test's end stops it too.
func UDPServer(tb testing.TB, answer func(req []byte) []byte) (addr string, stop func()) {
	tb.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			n, peer, err := conn.ReadFromUDP(buf)
			if err != nil {
				return
			}
			if reply := answer(buf[:n]); reply != nil {
				_, _ = conn.WriteToUDP(reply, peer)
			}
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			conn.Close()
			<-done
		})
	}
	tb.Cleanup(stop)
	return conn.LocalAddr().String(), stop
}

// Reflect sends back everything conn reads (each datagram, or each read
// of a stream) until a read fails: a client that turns every reply into
// the next request. Run it in a goroutine of its own.
func Reflect(conn net.Conn) {
	buf := make([]byte, 2048)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return
		}
		conn.Write(buf[:n])
	}
}

// TCPServer listens on loopback and serves each connection it accepts
// with serve, in a goroutine of its own, closing the connection when
// serve returns; the listener closes when the test ends. It returns the
// listening address.
func TCPServer(tb testing.TB, serve func(net.Conn)) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return ln.Addr().String()
}
