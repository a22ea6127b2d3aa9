package server

import (
	"strings"
	"testing"
)

// TestPendingJudgedByRunningModule: whether a tenant is pending follows
// the module it runs from the moment it runs it, before the records of a
// swap or a rollback are updated (the moment between the dispatcher
// taking the module and noteRollback or end), and agrees with the records
// once they are.
func TestPendingJudgedByRunningModule(t *testing.T) {
	const placeholder, module = "p1aceh01der", "m0du1e"
	var p pendingPulls
	p.add(&pendingPull{tenant: "a", what: `tenant "a"`, sha: placeholder})
	check := func(step, running string, want bool) {
		t.Helper()
		desc := p.describe("a", running)
		n := p.waiting(func(string) string { return running })
		if (desc != "") != want || (n == 1) != want {
			t.Fatalf("%s (running %q): describe %q, waiting %d; want pending %v", step, running, desc, n, want)
		}
	}
	check("waiting on the placeholder", placeholder, true)
	check("running not known", "", true)
	p.swapping("a", module)
	check("swapping in, the placeholder still runs", placeholder, true)
	check("swapped in, not yet ended", module, false)
	p.end("a")
	check("ended", module, false)
	check("rolled back to the placeholder, not yet noted", placeholder, true)
	if pp, pending := p.rolledBack("a", placeholder); pp == nil || !pending {
		t.Fatalf("rolledBack to the placeholder: %v %v", pp, pending)
	}
	check("rolled back to the placeholder", placeholder, true)
	if !strings.Contains(p.describe("a", placeholder), "rolled back") {
		t.Fatalf("describe %q does not say it was rolled back", p.describe("a", placeholder))
	}
	check("rolled back to the module, not yet noted", module, false)
	if pp, pending := p.rolledBack("a", module); pp == nil || pending {
		t.Fatalf("rolledBack to the module: %v %v", pp, pending)
	}
	check("rolled back to the module", module, false)
	p.forget("a")
	check("removed", placeholder, false)
}
