package redis

import (
	"math"
	"strconv"
	"strings"
	"sync"
)

// CONFIG GET and CONFIG SET know the parameters of redis-server 7.0 that
// clients, benchmarks and test suites read and set. Each is parsed and
// bounded as redis-server does, and its errors are redis-server's. A few
// change what psp does (maxmemory, proto-max-bulk-len); a few can only
// take the value that describes psp (maxmemory-policy noeviction,
// appendonly no, save ""), anything else refused with the reason; the
// others tune redis-server's encodings and background work, which psp
// does not have: they are kept and read back, and change nothing.

// paramKind is how a parameter's value is written.
type paramKind uint8

const (
	boolParam   paramKind = iota // yes or no
	intParam                     // a decimal integer
	memoryParam                  // bytes: a decimal integer with an optional unit (kb, mb, gb, k, m, g, b)
	enumParam                    // one of a list of names
	saveParam                    // pairs of seconds and changes, or nothing
)

// configParam is one parameter.
type configParam struct {
	name, alias string
	kind        paramKind
	// min and max bound integer and memory values; unsigned: compared and
	// printed as unsigned (redis-server's size_t and unsigned long long
	// parameters), max -1 then meaning 2^64-1.
	min, max  int64
	unsigned  bool
	values    []string // enumParam
	immutable bool
	def       string // the value CONFIG GET reads before any CONFIG SET
	// get reads a value psp owns; nil: the value kept by CONFIG SET.
	get func(s *Server) string
	// refuse says why psp cannot take a value of the right kind and
	// bounds; nil or "": it can.
	refuse func(s *Server, v int64, text string) string
	// apply makes psp follow a value it can take; nil: the value is kept
	// and read back, nothing else.
	apply func(s *Server, v int64)
	// normalize is what redis-server makes of a value in bounds before
	// keeping it; nil: the value itself.
	normalize func(v int64) int64
}

// Bounds of redis-server's C types.
const (
	intMax  = math.MaxInt32
	intMin  = math.MinInt32
	longMax = math.MaxInt64
)

var evictionPolicies = []string{"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl",
	"allkeys-lru", "allkeys-lfu", "allkeys-random", "noeviction"}

// configParams returns the parameters, sorted by name.
func configParams() []configParam {
	const noDisk = "psp keeps no data on disk"
	return []configParam{
		{name: "activerehashing", kind: boolParam, def: "yes"},
		{name: "appendonly", kind: boolParam, def: "no", refuse: func(_ *Server, v int64, _ string) string {
			if v != 0 {
				return noDisk
			}
			return ""
		}},
		{name: "busy-reply-threshold", alias: "lua-time-limit", kind: intParam, min: 0, max: longMax, def: "5000"},
		{name: "databases", kind: intParam, min: 1, max: intMax, immutable: true, def: "1"},
		{name: "hash-max-listpack-entries", alias: "hash-max-ziplist-entries", kind: intParam, min: 0, max: longMax, unsigned: true, def: "512"},
		{name: "hash-max-listpack-value", alias: "hash-max-ziplist-value", kind: memoryParam, min: 0, max: longMax, unsigned: true, def: "64"},
		{name: "hz", kind: intParam, min: 0, max: intMax, def: "10",
			normalize: func(v int64) int64 { return min(max(v, 1), 500) }},
		{name: "latency-tracking", kind: boolParam, def: "yes"},
		{name: "lazyfree-lazy-eviction", kind: boolParam, def: "no"},
		{name: "lazyfree-lazy-expire", kind: boolParam, def: "no"},
		{name: "lazyfree-lazy-server-del", kind: boolParam, def: "no"},
		{name: "lazyfree-lazy-user-del", kind: boolParam, def: "no"},
		{name: "lazyfree-lazy-user-flush", kind: boolParam, def: "no"},
		{name: "list-compress-depth", kind: intParam, min: 0, max: intMax, def: "0"},
		{name: "list-max-listpack-size", alias: "list-max-ziplist-size", kind: intParam, min: intMin, max: intMax, def: "-2"},
		{name: "maxmemory", kind: memoryParam, min: 0, max: -1, unsigned: true,
			get: func(s *Server) string { return strconv.FormatInt(s.maxMemory.Load(), 10) },
			refuse: func(s *Server, v int64, _ string) string {
				if bound := s.cfg.MaxMemory; bound > 0 && (v <= 0 || v > bound) {
					return "psp's dataset is bounded to " + strconv.FormatInt(bound, 10) + " bytes: maxmemory can be lowered from there, not raised or removed"
				}
				return ""
			},
			apply: func(s *Server, v int64) {
				if v < 0 { // past 2^63-1: a bound no dataset reaches
					v = math.MaxInt64
				}
				s.maxMemory.Store(v)
			}},
		{name: "maxmemory-eviction-tenacity", kind: intParam, min: 0, max: 100, def: "10"},
		{name: "maxmemory-policy", kind: enumParam, values: evictionPolicies, def: "noeviction", refuse: func(_ *Server, v int64, _ string) string {
			if evictionPolicies[v] != "noeviction" {
				return "psp evicts no keys: noeviction is its only policy"
			}
			return ""
		}},
		{name: "maxmemory-samples", kind: intParam, min: 1, max: intMax, def: "5"},
		{name: "port", kind: intParam, min: 0, max: 65535, immutable: true,
			get: func(s *Server) string { return strconv.Itoa(s.cfg.Port) }},
		{name: "proto-max-bulk-len", kind: memoryParam, min: 1 << 20, max: longMax,
			get: func(s *Server) string { return strconv.FormatInt(s.maxBulk.Load(), 10) },
			refuse: func(s *Server, v int64, _ string) string {
				if v > int64(s.cfg.MaxBulk) {
					return "psp accepts arguments of at most " + strconv.Itoa(s.cfg.MaxBulk) + " bytes: proto-max-bulk-len can be lowered from there, not raised"
				}
				return ""
			},
			apply: func(s *Server, v int64) { s.maxBulk.Store(v) }},
		{name: "save", kind: saveParam, def: "", refuse: func(_ *Server, _ int64, text string) string {
			if text != "" {
				return noDisk
			}
			return ""
		}},
		{name: "set-max-intset-entries", kind: intParam, min: 0, max: longMax, unsigned: true, def: "512"},
		{name: "slowlog-log-slower-than", kind: intParam, min: -1, max: longMax, def: "10000"},
		{name: "slowlog-max-len", kind: intParam, min: 0, max: longMax, unsigned: true, def: "128"},
		{name: "stream-node-max-bytes", kind: memoryParam, min: 0, max: longMax, unsigned: true,
			get:   func(s *Server) string { return strconv.FormatInt(s.streamNodeBytes.Load(), 10) },
			apply: func(s *Server, v int64) { s.streamNodeBytes.Store(v) }},
		{name: "stream-node-max-entries", kind: intParam, min: 0, max: longMax,
			get:   func(s *Server) string { return strconv.FormatInt(s.streamNodeEntries.Load(), 10) },
			apply: func(s *Server, v int64) { s.streamNodeEntries.Store(v) }},
		{name: "timeout", kind: intParam, min: 0, max: intMax, def: "0", refuse: func(_ *Server, v int64, _ string) string {
			if v != 0 {
				return "psp closes idle connections by its own timeout (--tcp-idle-timeout), not by this parameter"
			}
			return ""
		}},
		{name: "zset-max-listpack-entries", alias: "zset-max-ziplist-entries", kind: intParam, min: 0, max: longMax, unsigned: true, def: "128"},
		{name: "zset-max-listpack-value", alias: "zset-max-ziplist-value", kind: memoryParam, min: 0, max: longMax, unsigned: true, def: "64"},
	}
}

// configState is the parameters' values kept by CONFIG SET.
type configState struct {
	params []configParam
	mu     sync.Mutex
	values map[string]string // by name
}

func newConfigState() *configState {
	cs := &configState{params: configParams(), values: make(map[string]string)}
	for _, p := range cs.params {
		cs.values[p.name] = p.def
	}
	return cs
}

// lookup finds a parameter by its name or alias, case-insensitively.
func (cs *configState) lookup(name []byte) *configParam {
	p, _ := cs.lookupNamed(name)
	return p
}

// lookupNamed is lookup that also returns the parameter's name as
// redis-server knows the one given (its alias is an entry of its own,
// with its own name in errors).
func (cs *configState) lookupNamed(name []byte) (*configParam, string) {
	for i := range cs.params {
		p := &cs.params[i]
		if equalFold(name, p.name) {
			return p, p.name
		}
		if p.alias != "" && equalFold(name, p.alias) {
			return p, p.alias
		}
	}
	return nil, ""
}

// value is p's value as CONFIG GET writes it. cs.mu is held.
func (cs *configState) value(s *Server, p *configParam) string {
	if p.get != nil {
		return p.get(s)
	}
	return cs.values[p.name]
}

// cmdConfigGet answers the parameters matching the patterns: a name
// without glob characters is looked up (name or alias, any case) and
// answered under the name given; a pattern matches names and aliases.
func cmdConfigGet(c *ctx) {
	cs := c.s.config
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var names, values []string
	seen := make(map[string]bool)
	add := func(key string) {
		if !seen[key] {
			seen[key] = true
			names = append(names, key)
		}
	}
	byKey := make(map[string]*configParam)
	for _, pat := range c.argv[2:] {
		if !strings.ContainsAny(string(pat), "[*?") {
			if p := cs.lookup(pat); p != nil {
				byKey[string(pat)] = p
				add(string(pat))
			}
			continue
		}
		for i := range cs.params {
			p := &cs.params[i]
			for _, key := range []string{p.name, p.alias} {
				if key != "" && stringMatchFold(pat, key) {
					byKey[key] = p
					add(key)
				}
			}
		}
	}
	for _, key := range names {
		values = append(values, cs.value(c.s, byKey[key]))
	}
	c.o.mapLen(len(names))
	for i, key := range names {
		c.o.bulkString(key)
		c.o.bulkString(values[i])
	}
}

// stringMatchFold matches a CONFIG GET pattern, case-insensitively.
func stringMatchFold(pat []byte, name string) bool {
	return stringMatch([]byte(strings.ToLower(string(pat))), []byte(name))
}

// cmdConfigSet sets parameters, all or none, as redis-server's
// configSetCommand: names first (the first unknown one, then immutable
// ones and repeats: a parameter and its alias are not a repeat, the last
// value wins), then each value in order; psp's own refusals come last,
// after every value has been parsed.
func cmdConfigSet(c *ctx) {
	if len(c.argv)%2 != 0 {
		c.o.writeString(errSyntax)
		return
	}
	cs := c.s.config
	n := (len(c.argv) - 2) / 2
	params := make([]*configParam, n)
	names := make([]string, n) // as redis-server names each entry
	failed := func(arg, why string) {
		c.o.err("CONFIG SET failed (possibly related to argument '" + string(mapLineEnds([]byte(arg))) + "') - " + why)
	}
	for i := range n {
		if params[i], names[i] = cs.lookupNamed(c.argv[2+2*i]); params[i] == nil {
			c.o.errBytes(mapLineEnds(append([]byte("Unknown option or number of arguments for CONFIG SET - '"), append(cstr(c.argv[2+2*i]), '\'')...)))
			return
		}
	}
	for i, p := range params {
		given := string(cstr(c.argv[2+2*i]))
		if p.immutable {
			failed(given, "can't set immutable config")
			return
		}
		for j := range i {
			if params[j] == p && names[j] == names[i] {
				failed(given, "duplicate parameter")
				return
			}
		}
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	parsed := make([]int64, n)
	texts := make([]string, n)
	for i, p := range params {
		v, text, why := p.parse(cstr(c.argv[3+2*i]))
		if why != "" {
			failed(names[i], why)
			return
		}
		parsed[i], texts[i] = v, text
	}
	for i, p := range params {
		if p.refuse == nil {
			continue
		}
		if why := p.refuse(c.s, parsed[i], texts[i]); why != "" {
			failed(names[i], why)
			return
		}
	}
	for i, p := range params {
		if p.apply != nil {
			p.apply(c.s, parsed[i])
		}
		if p.get == nil {
			cs.values[p.name] = texts[i]
		}
	}
	c.o.ok()
}

// parse reads a value as redis-server reads it for p's kind: the value
// (an enum's index), its text as CONFIG GET will write it, or why it is
// not a value of p.
func (p *configParam) parse(arg []byte) (int64, string, string) {
	switch p.kind {
	case boolParam:
		switch {
		case equalFold(arg, "yes"):
			return 1, "yes", ""
		case equalFold(arg, "no"):
			return 0, "no", ""
		}
		return 0, "", "argument must be 'yes' or 'no'"
	case enumParam:
		for i, v := range p.values {
			if equalFold(arg, v) {
				return int64(i), v, ""
			}
		}
		return 0, "", "argument(s) must be one of the following: " + strings.Join(p.values, ", ")
	case saveParam:
		return 0, string(arg), checkSave(string(arg))
	}
	var v int64
	ok := false
	if p.kind == memoryParam {
		var u uint64
		if u, ok = memToUint(arg); ok {
			v = int64(u)
		}
	} else {
		v, ok = string2ll(arg)
	}
	if !ok {
		if p.kind == memoryParam {
			return 0, "", "argument must be a memory value"
		}
		return 0, "", "argument couldn't be parsed into an integer"
	}
	if p.unsigned {
		if uint64(v) < uint64(p.min) || uint64(v) > uint64(p.max) {
			return 0, "", "argument must be between " + strconv.FormatUint(uint64(p.min), 10) + " and " + strconv.FormatUint(uint64(p.max), 10) + " inclusive"
		}
		return v, strconv.FormatUint(uint64(v), 10), ""
	}
	if v < p.min || v > p.max {
		return 0, "", "argument must be between " + strconv.FormatInt(p.min, 10) + " and " + strconv.FormatInt(p.max, 10) + " inclusive"
	}
	if p.normalize != nil {
		v = p.normalize(v)
	}
	return v, strconv.FormatInt(v, 10), ""
}

// memToUint reads a memory value as redis-server's memtoull: digits and
// an optional unit, no sign; too many digits wrap as strtoull's result
// times the unit does in C.
func memToUint(p []byte) (uint64, bool) {
	i := 0
	for i < len(p) && p[i] >= '0' && p[i] <= '9' {
		i++
	}
	if len(p) > 0 && p[0] == '-' {
		return 0, false
	}
	var mul uint64
	switch unit := p[i:]; {
	case len(unit) == 0 || equalFold(unit, "b"):
		mul = 1
	case equalFold(unit, "k"):
		mul = 1000
	case equalFold(unit, "kb"):
		mul = 1024
	case equalFold(unit, "m"):
		mul = 1000 * 1000
	case equalFold(unit, "mb"):
		mul = 1024 * 1024
	case equalFold(unit, "g"):
		mul = 1000 * 1000 * 1000
	case equalFold(unit, "gb"):
		mul = 1024 * 1024 * 1024
	default:
		return 0, false
	}
	if i >= 128 {
		return 0, false
	}
	var v uint64
	for _, d := range p[:i] {
		if v > (math.MaxUint64-uint64(d-'0'))/10 {
			v = math.MaxUint64 // strtoull saturates
			break
		}
		v = v*10 + uint64(d-'0')
	}
	return v * mul, true
}

// checkSave checks a save value as redis-server's setConfigSaveOption:
// nothing, or pairs of seconds (at least 1) and changes (at least 0),
// separated by single spaces.
func checkSave(v string) string {
	if v == "" {
		return ""
	}
	args := strings.Split(v, " ")
	if len(args) == 1 && args[0] == "" {
		return ""
	}
	if len(args)%2 != 0 {
		return "Invalid save parameters"
	}
	for j, a := range args {
		n, ok := strtoll(a)
		if !ok || (j%2 == 0 && n < 1) || (j%2 == 1 && n < 0) {
			return "Invalid save parameters"
		}
	}
	return ""
}

// strtoll reads a whole string as C's strtoll in base 10 does: leading
// white space, an optional sign, digits (none reads as 0), saturating at
// the int64 bounds.
func strtoll(a string) (int64, bool) {
	i := 0
	for i < len(a) && isSpace(a[i]) {
		i++
	}
	neg := false
	if i < len(a) && (a[i] == '+' || a[i] == '-') {
		neg = a[i] == '-'
		i++
	}
	start := i
	var v uint64
	for ; i < len(a) && a[i] >= '0' && a[i] <= '9'; i++ {
		if d := uint64(a[i] - '0'); v <= (1<<63-d)/10 {
			v = v*10 + d
		} else {
			v = 1 << 63
		}
	}
	if i == start {
		return 0, a == "" // no digits: nothing read, the whole string left
	}
	if i != len(a) {
		return 0, false
	}
	if neg {
		return -int64(min(v, 1<<63)), true
	}
	return int64(min(v, 1<<63-1)), true
}

func cmdConfigResetstat(c *ctx) {
	c.s.resetStats()
	c.o.ok()
}

func cmdConfigRewrite(c *ctx) {
	c.o.err("The server is running without a config file")
}

func cmdConfigHelp(c *ctx) {
	writeHelp(c, []string{
		"CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"GET <pattern>", "    Return parameters matching the glob-like <pattern> and their values.",
		"SET <directive> <value>", "    Set the configuration <directive> to <value>.",
		"RESETSTAT", "    Reset statistics reported by the INFO command.",
		"REWRITE", "    Rewrite the configuration file.",
		"HELP", "    Prints this help.",
	})
}
