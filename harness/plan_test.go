package harness

import (
	"testing"

	"github.com/persephone-go/psp/server"
)

// TestPlanUseStatus: a plan takes the dilation it left unset from the
// server's status, and keeps its own.
func TestPlanUseStatus(t *testing.T) {
	p := Plan{}
	p.UseStatus(&server.Status{Dilation: 1000})
	if p.Spec.Dilation != 1000 {
		t.Errorf("UseStatus: dilation %v", p.Spec.Dilation)
	}
	p.UseStatus(&server.Status{Dilation: 10})
	if p.Spec.Dilation != 1000 {
		t.Errorf("UseStatus over a set dilation: %v", p.Spec.Dilation)
	}
}
