package server

import (
	"errors"
	"fmt"

	"github.com/persephone-go/psp/dispatcher"
)

// Errors of the tenant operations (swap, rollback, add, update, remove),
// besides darc.ErrUnknownTenant (no tenant has that name: HTTP 404),
// wasmclass.ErrNoPrevious (a rollback found no previous classifier: 409)
// and wasmclass.ErrConflict (a conditional swap or rollback found another
// module running than the one it expected to replace, or a newer push for
// the tenant started before it landed: 409).
var (
	// ErrNoWasm: the tenant runs the native classifier, there is nothing
	// to swap.
	ErrNoWasm = errors.New("server: no Wasm classifier to swap (a native classifier runs)")
	// ErrBadClassifier: the new module failed to load; the old one stays.
	ErrBadClassifier = errors.New("server: classifier rejected")
	// ErrTenantExists: an added tenant's name is taken.
	ErrTenantExists = errors.New("server: tenant exists")
	// ErrFixedTenants: the policy has no tenant shares (c-FCFS, d-FCFS,
	// FP), so its tenants are fixed when the server starts (HTTP 409).
	ErrFixedTenants = errors.New("server: the tenants cannot change under this policy")
)

// headerTypes returns the native classifier's type names, blanks filled.
func headerTypes() []string {
	names := dispatcher.HeaderTypeNames()
	for i, n := range names {
		if n == "" {
			names[i] = fmt.Sprintf("type%d", i)
		}
	}
	return names
}
