// Package admin is the client of a psp server's admin API (psp serve
// --admin): its status, metrics and tenants, and hot swaps and rollbacks
// of their classifiers. The documents it reads and sends are the server's
// (server.Status, server.TenantInfo, server.Tenant, server.SwapResult).
//
// A Client is safe for concurrent use. Each request is bounded by its
// context and by the client's timeout; answers are read up to a bound.
// A conditional swap or rollback refused because another module runs
// fails with an error wrapping wasmclass.ErrConflict.
package admin
