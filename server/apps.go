package server

import (
	"fmt"

	"github.com/persephone-go/psp/app/kv"
	"github.com/persephone-go/psp/app/spin"
	"github.com/persephone-go/psp/app/tpcc"
	"github.com/persephone-go/psp/dispatcher"
)

// openOtherApp builds the kv and tpcc applications.
func openOtherApp(cfg Config) (dispatcher.Handler, func() error, error) {
	switch cfg.App.Name {
	case AppTPCC:
		h, err := tpcc.New(tpcc.Config{Dilation: cfg.App.Dilation, SpinTail: cfg.App.SpinTail, MaxService: spin.Cap(cfg.App.MaxService)})
		if err != nil {
			return nil, nil, fmt.Errorf("server: app: %w", err)
		}
		return h, func() error { return nil }, nil
	case AppKV:
		s, err := kv.Open(kv.Config{Dir: cfg.App.KV.Dir, Keys: cfg.App.KV.Keys, ValueSize: cfg.App.KV.ValueSize})
		if err != nil {
			return nil, nil, fmt.Errorf("server: app: %w", err)
		}
		return s, s.Close, nil
	}
	return nil, nil, fmt.Errorf("server: unknown app %q", cfg.App.Name)
}
