package server

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/persephone-go/psp/dispatcher"
	"github.com/persephone-go/psp/wasmclass"
)

// Errors returned by Swap.
var (
	// ErrNoWasm: the server runs the native classifier, there is nothing to
	// swap.
	ErrNoWasm = errors.New("server: no Wasm classifier to swap (a native classifier runs)")
	// ErrUnknownTenant: no tenant has that name.
	ErrUnknownTenant = errors.New("server: unknown tenant")
	// ErrBadClassifier: the new module failed to load; the old one stays.
	ErrBadClassifier = errors.New("server: classifier rejected")
	// ErrNoPrevious: a rollback found no previous classifier.
	ErrNoPrevious = errors.New("server: no previous classifier to roll back to")
	// ErrConflict: a conditional swap or rollback found another module
	// running than the one it expected to replace (HTTP 409).
	ErrConflict = errors.New("server: conflict")
	// ErrTenantExists: an added tenant's name is taken.
	ErrTenantExists = errors.New("server: tenant exists")
	// ErrSingleTenant: the tenant set cannot change (a single classifier,
	// or a policy without tenant shares).
	ErrSingleTenant = errors.New("server: the tenants cannot change on this server (start it with policy darc or darc-static and tenants, or multi_tenant: true)")
)

// nativeTenant is the tenant name shown for the native classifier.
const nativeTenant = "native"

// tenants is the server's classifier: native or a Wasm host.
type tenants struct {
	classifier dispatcher.Classifier
	types      []string
	nativeName string       // describes the native classifier
	wasm       *wasmTenants // nil: native
}

// openTenants builds the classifier for cfg: the Wasm tenants it names
// (with wopts as every tenant's base classifier options), else app's native
// classifier, else the psp-header classifier.
func openTenants(ctx context.Context, cfg Config, app *Application, wopts wasmclass.Options) (*tenants, error) {
	wopts = cfg.ClassifierOptions.wasm(wopts)
	if cfg.Classifier != "" {
		cfg.Tenants = []Tenant{{Name: DefaultTenant, Classifier: cfg.Classifier, Wasm: cfg.classifierWasm, Fail: cfg.Fail}}
	}
	if len(cfg.Tenants) == 0 {
		if app.Classifier != nil {
			return &tenants{classifier: app.Classifier, types: app.TypeNames, nativeName: "native " + app.Name}, nil
		}
		return &tenants{classifier: dispatcher.HeaderClassifier{}, types: headerTypes(), nativeName: "native psp header"}, nil
	}
	w, err := openWasmTenants(ctx, cfg.Tenants, wopts)
	if err != nil {
		return nil, err
	}
	return &tenants{classifier: w.caller, types: w.types(), wasm: w}, nil
}

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

func (t *tenants) describe() string {
	if t.wasm == nil {
		return t.nativeName
	}
	return t.wasm.describe()
}

func (t *tenants) status() []TenantInfo {
	if t.wasm == nil {
		return []TenantInfo{{Name: nativeTenant, Version: 1, Native: true, Types: t.types}}
	}
	return t.wasm.status()
}

// declared marks, by type id, the types the classifiers declare; nil for
// the native classifiers, which declare none: their types are the wire's
// whole type space, shown once they see a request.
func (t *tenants) declared() []bool {
	if t.wasm == nil {
		return nil
	}
	return t.wasm.declared(len(t.types))
}

func (t *tenants) swap(ctx context.Context, name string, wasm []byte, exp wasmclass.Expect) (int, error) {
	if t.wasm == nil {
		return 0, ErrNoWasm
	}
	return t.wasm.swap(ctx, name, wasm, exp)
}

func (t *tenants) rollback(ctx context.Context, name string, exp wasmclass.Expect) (int, error) {
	if t.wasm == nil {
		return 0, ErrNoWasm
	}
	return t.wasm.rollback(ctx, name, exp)
}

// has reports whether a tenant called name exists.
func (t *tenants) has(name string) bool {
	if t.wasm == nil {
		return name == nativeTenant
	}
	return slices.ContainsFunc(t.wasm.specs, func(s Tenant) bool { return s.Name == name })
}

func (t *tenants) close() error {
	if t.wasm == nil {
		return nil
	}
	return t.wasm.close()
}
