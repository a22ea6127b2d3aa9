package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/nic"
)

// TestRemoveReleasesOffTheLoop: an inline tenant's
// classifier is closed by RemoveTenant's caller, not on the dispatcher
// goroutine: while its close takes long, the dispatcher applies other
// changes and publishes stats.
func TestRemoveReleasesOffTheLoop(t *testing.T) {
	dp := newFakeDataplane(4, 1024, 64)
	closing, release := make(chan struct{}), make(chan struct{})
	d, err := New(Spec{Workers: 4, Spin: -1, StatsInterval: time.Millisecond,
		Tenants: []TenantSpec{
			{Name: "a", Ports: []uint16{portA}, Classifier: HeaderClassifier{}},
			{Name: "b", Ports: []uint16{portB}, Classifier: HeaderClassifier{}, Isolation: IsolateInline,
				Release: func() { close(closing); <-release }},
		}}, dp, nil, tenantPolicy(t, 4, 0), app.HandlerFunc(func(int, darc.Type, *nic.Buffer) bool { return true }))
	if err != nil {
		t.Fatal(err)
	}
	runTenants(t, d)
	ctx := context.Background()
	removed := make(chan error, 1)
	go func() { removed <- d.RemoveTenant(ctx, "b") }()
	select {
	case <-closing:
	case <-time.After(10 * time.Second):
		t.Fatal("b's classifier was never released")
	}
	start := time.Now()
	updated := make(chan error, 1)
	go func() {
		updated <- d.UpdateTenant(ctx, TenantSpec{Name: "a", Ports: []uint16{portA, 3000},
			Share: darc.TenantConfig{NumTypes: HeaderNumTypes, TypeNames: HeaderTypeNames()}})
	}()
	select {
	case err := <-updated:
		if err != nil {
			t.Errorf("updating a while b's classifier closes: %v", err)
		}
		t.Logf("update applied in %v while b's classifier closed", time.Since(start))
	case <-time.After(3 * time.Second):
		t.Errorf("updating a waited 3s for b's classifier to close: the dispatcher goroutine closes it")
		close(release)
		<-updated
		release = nil
	}
	if release != nil {
		close(release)
	}
	if err := <-removed; err != nil {
		t.Fatal(err)
	}
}
