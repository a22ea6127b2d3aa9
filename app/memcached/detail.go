package memcached

import (
	"bytes"
	"strconv"
	"sync"
	"sync/atomic"
)

// prefixStats are the counts of stats detail: per key prefix (the key up
// to its first ':', memcached's default delimiter), the gets, hits, sets
// and deletes since stats detail on. Keys without the delimiter are not
// counted. As memcached, it keeps a table of 256 chains by the prefix's
// MurmurHash3 and dumps them in that order, newest first in a chain, so a
// dump lists the prefixes in memcached's order. It holds at most
// maxPrefixes prefixes; later ones are not counted.
type prefixStats struct {
	enabled atomic.Bool
	mu      sync.Mutex
	chains  [prefixChains][]*prefixCount // each newest first
	n       int
}

type prefixCount struct {
	prefix                    string
	gets, hits, sets, deletes uint64
}

const (
	prefixChains    = 256
	prefixDelimiter = ':'
	maxPrefixes     = 1 << 16
)

// find returns key's prefix counts, added if new, or nil (mu held).
func (p *prefixStats) find(key []byte) *prefixCount {
	i := bytes.IndexByte(key, prefixDelimiter)
	if i < 0 {
		return nil
	}
	prefix := key[:i]
	chain := &p.chains[murmur3(prefix)%prefixChains]
	for _, c := range *chain {
		if c.prefix == string(prefix) {
			return c
		}
	}
	if p.n >= maxPrefixes {
		return nil
	}
	c := &prefixCount{prefix: string(prefix)}
	*chain = append([]*prefixCount{c}, *chain...)
	p.n++
	return c
}

// Kinds of recorded command.
const (
	prefixGet = iota
	prefixSet
	prefixDelete
)

// record counts a command on key when stats detail is on.
func (p *prefixStats) record(key []byte, kind int, hit bool) {
	if !p.enabled.Load() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.find(key)
	if c == nil {
		return
	}
	switch kind {
	case prefixGet:
		c.gets++
		if hit {
			c.hits++
		}
	case prefixSet:
		c.sets++
	case prefixDelete:
		c.deletes++
	}
}

// dump appends memcached's stats detail dump: a PREFIX line per prefix,
// then END.
func (p *prefixStats) dump(out []byte) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, chain := range p.chains {
		for _, c := range chain {
			out = append(out, "PREFIX "...)
			out = append(out, c.prefix...)
			out = append(out, " get "...)
			out = strconv.AppendUint(out, c.gets, 10)
			out = append(out, " hit "...)
			out = strconv.AppendUint(out, c.hits, 10)
			out = append(out, " set "...)
			out = strconv.AppendUint(out, c.sets, 10)
			out = append(out, " del "...)
			out = strconv.AppendUint(out, c.deletes, 10)
			out = append(out, crlf...)
		}
	}
	return append(out, endLine...)
}

// clear forgets every prefix (stats reset).
func (p *prefixStats) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.chains = [prefixChains][]*prefixCount{}
	p.n = 0
}

// statsDetail runs stats detail on, off and dump (memcached's
// process_stats_detail).
func (s *session) statsDetail(arg []byte) {
	p := &s.app.prefixes
	switch string(arg) {
	case "on":
		p.enabled.Store(true)
		s.outString(msgOK)
	case "off":
		p.enabled.Store(false)
		s.outString(msgOK)
	case "dump":
		s.out = p.dump(s.out[:s.open])
	default:
		s.outString(msgStatsDetailUse)
	}
}

// murmur3 is MurmurHash3_x86_32 with seed 0, memcached's default hash.
func murmur3(data []byte) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	var h uint32
	n := len(data) / 4
	for i := range n {
		k := uint32(data[4*i]) | uint32(data[4*i+1])<<8 | uint32(data[4*i+2])<<16 | uint32(data[4*i+3])<<24
		k *= c1
		k = k<<15 | k>>17
		k *= c2
		h ^= k
		h = h<<13 | h>>19
		h = h*5 + 0xe6546b64
	}
	tail := data[4*n:]
	var k uint32
	switch len(tail) {
	case 3:
		k ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		k ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		k ^= uint32(tail[0])
		k *= c1
		k = k<<15 | k>>17
		k *= c2
		h ^= k
	}
	h ^= uint32(len(data))
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
