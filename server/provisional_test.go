package server

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestProvisionalSwap: a provisional swap nobody confirms is rolled back
// by the server at its deadline (audited as a revert); one confirmed with
// an extension stays provisional past its first deadline; one confirmed
// for good stays. A confirm naming another module is refused (409).
func TestProvisionalSwap(t *testing.T) {
	h, log, sum1, v2, sum2 := twoModules(t)
	running := func() TenantInfo { return tenantOf(t, getStatus(t, h), "default") }

	// Unconfirmed: reverted within its second.
	if rec := do(t, h, "PUT", "/tenants/default/classifier?provisional=1s", "operator-secret", v2); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"provisional"`) {
		t.Fatalf("provisional swap: %d %s", rec.Code, rec.Body)
	}
	if ti := running(); ti.SHA256 != sum2 || ti.Provisional == nil || ti.Provisional.SHA256 != sum2 {
		t.Fatalf("after the swap: %s, provisional %+v", ti.SHA256, ti.Provisional)
	}
	ti := waitTenant(t, h, "default", func(ti TenantInfo) bool { return ti.SHA256 == sum1 })
	if ti.Provisional != nil || !strings.Contains(log.String(), "not confirmed in time: reverted") || !strings.Contains(log.String(), `"event":"revert"`) {
		t.Fatalf("after the deadline: provisional %+v\n%s", ti.Provisional, log)
	}

	// Extended, then confirmed for good.
	if rec := do(t, h, "PUT", "/tenants/default/classifier?provisional=1s", "operator-secret", v2); rec.Code != http.StatusOK {
		t.Fatalf("provisional swap: %d %s", rec.Code, rec.Body)
	}
	if rec := do(t, h, "POST", "/tenants/default/confirm?expect_sha256="+sum1, "operator-secret", nil); rec.Code != http.StatusConflict {
		t.Fatalf("confirm of another module: %d %s, want 409", rec.Code, rec.Body)
	}
	if rec := do(t, h, "POST", "/tenants/default/confirm?expect_sha256="+sum2+"&provisional=3s", "operator-secret", nil); rec.Code != http.StatusOK {
		t.Fatalf("extend: %d %s", rec.Code, rec.Body)
	}
	time.Sleep(1500 * time.Millisecond)
	if ti := running(); ti.SHA256 != sum2 || ti.Provisional == nil {
		t.Fatalf("extended, past the first deadline: %s, provisional %+v", ti.SHA256, ti.Provisional)
	}
	if rec := do(t, h, "POST", "/tenants/default/confirm?expect_sha256="+sum2, "operator-secret", nil); rec.Code != http.StatusOK {
		t.Fatalf("confirm: %d %s", rec.Code, rec.Body)
	}
	time.Sleep(2 * time.Second)
	if ti := running(); ti.SHA256 != sum2 || ti.Provisional != nil {
		t.Fatalf("confirmed, past the extended deadline: %s, provisional %+v", ti.SHA256, ti.Provisional)
	}
	if rec := do(t, h, "POST", "/tenants/default/confirm?expect_sha256="+sum2, "operator-secret", nil); rec.Code != http.StatusOK {
		t.Fatalf("confirming a confirmed module again: %d %s", rec.Code, rec.Body)
	}
	for _, bad := range []string{"provisional=10ms", "provisional=48h", "provisional=soon"} {
		if rec := do(t, h, "PUT", "/tenants/default/classifier?"+bad, "operator-secret", v2); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", bad, rec.Code)
		}
	}
}
