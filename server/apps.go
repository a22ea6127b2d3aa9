package server

import (
	"fmt"

	"github.com/persephone-go/psp/dispatcher"
)

// openOtherApp builds the kv and tpcc applications.
func openOtherApp(cfg Config) (dispatcher.Handler, func() error, error) {
	return nil, nil, fmt.Errorf("server: app %q is not available yet", cfg.App.Name)
}
