package server

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/persephone-go/psp/wire"
)

func TestTmpDebug(t *testing.T) {
	for _, wasm := range []bool{false, true} {
		cfg := Config{Listen: "127.0.0.1:0", Workers: 4, Buffers: 512, Policy: "darc", MinSamples: 100,
			App: App{Name: AppEmulate, Dilation: 10}, Admin: Admin{Addr: "127.0.0.1:0"}}
		if wasm {
			cfg.Classifier = exampleWasm(t, "pspheader.wasm")
		}
		r := start(t, cfg)
		admin := "http://" + r.srv.AdminAddr()
		client := newUDPClient(t, r.srv.Addr())
		for i := 0; i < 600; i++ {
			typ, svc := wire.TypeShort, uint32(1000)
			if i%2 == 1 {
				typ, svc = wire.TypeLong, 20000
			}
			client.send(t, header(uint32(i), typ, svc))
			if i%20 == 19 {
				time.Sleep(5 * time.Millisecond)
			}
		}
		time.Sleep(300 * time.Millisecond)
		client.send(t, []byte{0xde, 0xad})
		client.send(t, append(header(1000, wire.TypeShort, 1), make([]byte, 5000)...))
		client.send(t, header(1001, 0xdeadbeef, 100))
		client.send(t, header(1002, wire.TypeShort, 0xffffffff))
		time.Sleep(500 * time.Millisecond)
		st := httpStatus(t, admin)
		j, _ := json.Marshal(st.Types[:3])
		t.Logf("wasm %v: %d replies, received %d drops %+v groups %+v types %s", wasm, client.count(), st.Received, st.Drops, st.Groups, j)
		r.stop()
	}
}
