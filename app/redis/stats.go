package redis

// Counter is one of the server's figures, for monitoring (a Prometheus
// metric name without a prefix).
type Counter struct {
	Name  string
	Help  string
	Gauge bool // the value goes up and down; otherwise it only grows
	Value float64
}

// Counters returns the server's figures, always the same names in the
// same order. Safe for concurrent use.
func (s *Server) Counters() []Counter {
	var commands, hits, misses, oom, cut uint64
	for _, w := range s.workers {
		commands += w.stats.commands.Load()
		hits += w.stats.hits.Load()
		misses += w.stats.misses.Load()
		oom += w.stats.oom.Load()
		cut += w.stats.cut.Load()
	}
	return []Counter{
		{Name: "redis_commands_total", Help: "Commands run (errors included).", Value: float64(commands)},
		{Name: "redis_keyspace_hits_total", Help: "Keys found by the commands that read them.", Value: float64(hits)},
		{Name: "redis_keyspace_misses_total", Help: "Keys not found by the commands that read them.", Value: float64(misses)},
		{Name: "redis_oom_refusals_total", Help: "Commands refused with the OOM error because the dataset was over its maxmemory.", Value: float64(oom)},
		{Name: "redis_replies_cut_total", Help: "Replies cut short (no buffer left for the rest), their connection closed.", Value: float64(cut)},
		{Name: "redis_expired_keys_total", Help: "Keys deleted by the background expiry sweep.", Value: float64(s.expired.Load())},
		{Name: "redis_keys", Help: "Keys held (those expired and not yet swept included).", Gauge: true, Value: float64(s.db.keys.Load())},
		{Name: "redis_used_memory_bytes", Help: "The dataset's estimated size, compared with maxmemory.", Gauge: true, Value: float64(s.db.used.Load())},
		{Name: "redis_connections", Help: "Connections open.", Gauge: true, Value: float64(s.connsOpened.Load() - s.connsClosed.Load())},
	}
}
