package tmpprobe

import (
	"context"
	"net/netip"
	"sort"
	"testing"
	"time"

	"github.com/persephone-go/psp/nic/memnic"
	"github.com/persephone-go/psp/server"
	"github.com/persephone-go/psp/wire"
)

func TestProbe(t *testing.T) {
	for _, workers := range []int{1, 14} {
		srv, err := server.New(context.Background(), server.Config{Dataplane: "memnic", Workers: workers, Policy: "cfcfs", Idle: "busy-poll", App: server.App{Name: "spin"}, Admin: server.Admin{Addr: "off"}}, server.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() { if err := srv.Run(ctx); err != nil { t.Log("run:", err) } }()
		dp := srv.Dataplane().(*memnic.Dataplane)
		p := make([]byte, 16)
		wire.Header{ID: 1, Type: 1}.Encode(p)
		var lat []time.Duration
		for i := 0; i < 200; i++ {
			time.Sleep(5 * time.Millisecond)
			s := time.Now()
			dp.Inject(p, netip.MustParseAddrPort("1.2.3.4:5"))
			select {
			case <-dp.Replies():
			case <-time.After(time.Second):
				st := srv.Dispatcher().Stats()
				t.Fatalf("no reply: stats %+v free %d net %+v", *st, dp.FreeBuffers(), dp.Stats())
			}
			lat = append(lat, time.Since(s))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		t.Logf("workers %d: idle round trip p50 %v p90 %v p99 %v", workers, lat[100], lat[180], lat[198])
		cancel()
		time.Sleep(100 * time.Millisecond)
	}
}
