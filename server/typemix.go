package server

import (
	"context"
	"sync"
	"time"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/dispatcher"
)

// Type mix: psp_type_share_ratio is the share of each type among the
// requests its tenant's classifier typed over the last shareWindow, from
// samples of the per-type counters taken every shareEvery: what a rollout
// compares between servers on an old and a new classifier (a module that
// types every request alike shows here first).
const (
	shareEvery  = time.Second
	shareWindow = 10 * time.Second
	shareSlots  = int(shareWindow/shareEvery) + 1
)

// typeMix keeps the last shareSlots samples of the per-type received
// counters. Safe for concurrent use.
type typeMix struct {
	mu      sync.Mutex
	samples [shareSlots][]uint64 // by type id; a ring
	next    int                  // the slot the next sample goes to
	n       int                  // samples taken, up to shareSlots
}

// sample records st's per-type received counters.
func (m *typeMix) sample(st *dispatcher.Stats) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.samples[m.next][:0]
	for _, t := range st.Types {
		for int(t.Type) >= len(s) {
			s = append(s, 0)
		}
		s[t.Type] = typed(t)
	}
	m.samples[m.next] = s
	m.next = (m.next + 1) % shareSlots
	m.n = min(m.n+1, shareSlots)
}

// shares returns each type's share among its tenant's typed requests
// between the oldest sample kept and st (by type id; 0 for a tenant that
// typed nothing meanwhile), or nil before the first sample.
func (m *typeMix) shares(st *dispatcher.Stats) []float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n == 0 {
		return nil
	}
	old := m.samples[(m.next-m.n+shareSlots)%shareSlots]
	delta := make([]float64, len(st.Types))
	total := map[int]float64{} // by tenant index; -1: no tenant
	tenantOf := func(id darc.Type) int {
		for k, t := range st.Tenants {
			if !t.Removed && id >= t.Base && int(id) < int(t.Base)+t.NumTypes {
				return k
			}
		}
		return -1
	}
	owner := make([]int, len(st.Types))
	for i, t := range st.Types {
		var before uint64
		if int(t.Type) < len(old) {
			before = old[t.Type]
		}
		n := typed(t)
		delta[i] = float64(n - min(n, before))
		owner[i] = tenantOf(t.Type)
		total[owner[i]] += delta[i]
	}
	out := make([]float64, 0, len(st.Types))
	for i, t := range st.Types {
		for int(t.Type) >= len(out) {
			out = append(out, 0)
		}
		if tot := total[owner[i]]; tot > 0 {
			out[t.Type] = delta[i] / tot
		}
	}
	return out
}

// sampleTypeMix samples the type mix every shareEvery until ctx ends.
func (s *Server) sampleTypeMix(ctx context.Context) {
	t := time.NewTicker(shareEvery)
	defer t.Stop()
	for {
		s.mix.sample(s.disp.Stats())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// typed is the requests of a type its classifier typed: a packet the
// tenant's classifier lane had no room for is counted received on its
// UNKNOWN and dropped (classifier_busy), never typed.
func typed(t dispatcher.TypeStats) uint64 {
	return t.Received - min(t.Received, t.Drops.ClassifierBusy)
}
