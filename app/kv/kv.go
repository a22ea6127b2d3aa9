package kv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/internal/dirlock"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/wire"
)

// Limits and defaults.
const (
	DefaultKeys      = 5000
	DefaultValueSize = 64
	DefaultScanCount = 5000
	MaxKeyLen        = 256
	MaxScanCount     = 1 << 20
)

// Response statuses (offset 8 of the response).
const (
	StatusOK         uint32 = 0
	StatusNotFound   uint32 = 1
	StatusBadRequest uint32 = 2
	// StatusOverloaded: the server shed the request without serving it
	// (see ReplyOverloaded); try again later or elsewhere.
	StatusOverloaded uint32 = 3
)

// Errors returned by Parse.
var (
	ErrShort   = errors.New("kv: request shorter than the 16-byte header")
	ErrOp      = errors.New("kv: type is neither GET (10) nor SCAN (11)")
	ErrKey     = errors.New("kv: key missing or longer than 256 bytes")
	ErrCount   = errors.New("kv: scan count too large or set on a GET")
	ErrConfig  = errors.New("kv: invalid config")
	errClosed  = errors.New("kv: store closed")
	errPreload = errors.New("kv: preload")
)

// Request is a parsed request. Key aliases the payload.
type Request struct {
	ID    uint32
	Op    uint32 // wire.TypeGet or wire.TypeScan
	Count uint32 // SCAN only
	Key   []byte
}

// Parse decodes a request in place; it allocates nothing.
func Parse(payload []byte) (Request, error) {
	h, err := wire.Decode(payload)
	if err != nil {
		return Request{}, ErrShort
	}
	r := Request{ID: h.ID, Op: h.Type, Count: h.Reserved, Key: payload[wire.HeaderLen:]}
	switch {
	case r.Op != wire.TypeGet && r.Op != wire.TypeScan:
		return r, ErrOp
	case len(r.Key) == 0 || len(r.Key) > MaxKeyLen:
		return r, ErrKey
	case r.Op == wire.TypeGet && r.Count != 0, r.Count > MaxScanCount:
		return r, ErrCount
	}
	return r, nil
}

// Encode writes a request into b (which must hold 16+len(key) bytes) and
// returns its length.
func Encode(b []byte, r Request) int {
	wire.Header{ID: r.ID, Type: r.Op, Reserved: r.Count}.Encode(b)
	return wire.HeaderLen + copy(b[wire.HeaderLen:], r.Key)
}

// Key returns the i-th preloaded key.
func Key(i int) []byte { return fmt.Appendf(nil, "k%05d", i) }

// Config configures a Store. The zero value is an in-memory store of 5,000
// keys with 64-byte values.
type Config struct {
	// Dir is the Pebble directory; empty: in memory (vfs.NewMem).
	Dir string
	// MaxOpenFiles bounds the store's files open at once (with Dir); 0:
	// Pebble's default, 1,000.
	MaxOpenFiles int
	// Keys is the number of keys preloaded. Default 5000.
	Keys int
	// ValueSize is the size of each preloaded value. Default 64.
	ValueSize int
}

// Store is the application: a Pebble database and the request handler.
type Store struct {
	db  *pebble.DB
	cfg Config
}

// Validate checks c (zero keys and value size are the defaults).
func (c Config) Validate() error {
	if c.Keys < 0 || c.Keys > 99999 || c.ValueSize < 0 || c.ValueSize > 1<<20 {
		return fmt.Errorf("%w: keys %d (want 1..99999), value size %d (want 1..1MiB)", ErrConfig, c.Keys, c.ValueSize)
	}
	return nil
}

// Open opens (and preloads) the store.
func Open(c Config) (*Store, error) {
	if c.Keys == 0 {
		c.Keys = DefaultKeys
	}
	if c.ValueSize == 0 {
		c.ValueSize = DefaultValueSize
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	opts := &pebble.Options{}
	if c.Dir == "" {
		opts.FS = vfs.NewMem()
	} else if c.MaxOpenFiles > 0 {
		opts.MaxOpenFiles = c.MaxOpenFiles
	}
	db, err := pebble.Open(c.Dir, opts)
	if err != nil {
		return nil, fmt.Errorf("kv: open store %q: %w", c.Dir, dirlock.Check(c.Dir, err))
	}
	s := &Store{db: db, cfg: c}
	if err := s.preload(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// preload writes the keys with deterministic values.
func (s *Store) preload() error {
	batch := s.db.NewBatch()
	val := make([]byte, s.cfg.ValueSize)
	for i := 0; i < s.cfg.Keys; i++ {
		for j := range val {
			val[j] = byte('a' + (i+j)%26)
		}
		if err := batch.Set(Key(i), val, nil); err != nil {
			return fmt.Errorf("%w: %w", errPreload, err)
		}
	}
	if err := batch.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("%w: %w", errPreload, err)
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error {
	if s.db == nil {
		return errClosed
	}
	err := s.db.Close()
	s.db = nil
	return err
}

// Handle implements app.Handler: it answers every request, malformed
// ones with StatusBadRequest (payloads shorter than the header are refused).
func (s *Store) Handle(_ int, _ app.Type, b *nic.Buffer) bool {
	req, err := Parse(b.Payload())
	if errors.Is(err, ErrShort) {
		return false
	}
	status := StatusOK
	n := wire.HeaderLen
	switch {
	case err != nil:
		status = StatusBadRequest
	case req.Op == wire.TypeGet:
		status, n = s.get(req.Key, b.Data)
	default:
		status, n = s.scan(req.Key, req.Count, b.Data)
	}
	binary.LittleEndian.PutUint32(b.Data[8:], status)
	b.Len = n
	return true
}

// ReplyOverloaded implements app.OverloadReplier: a request with a
// psp header gets its header back with StatusOverloaded at offset 8;
// shorter payloads get no reply. It allocates nothing and is safe to call
// concurrently with Handle.
func (s *Store) ReplyOverloaded(_ app.Type, b *nic.Buffer) bool {
	if b.Len < wire.HeaderLen || len(b.Data) < wire.HeaderLen {
		return false
	}
	binary.LittleEndian.PutUint32(b.Data[8:], StatusOverloaded)
	b.Len = wire.HeaderLen
	return true
}

// get writes the value of key after the header in out.
func (s *Store) get(key, out []byte) (uint32, int) {
	// The key aliases out: copy it before the value overwrites it.
	var kb [MaxKeyLen]byte
	k := kb[:copy(kb[:], key)]
	v, closer, err := s.db.Get(k)
	if err != nil {
		return StatusNotFound, wire.HeaderLen
	}
	n := copy(out[wire.HeaderLen:], v)
	closer.Close()
	return StatusOK, wire.HeaderLen + n
}

// scan reads count keys from key on and writes the summary after the header.
func (s *Store) scan(key []byte, count uint32, out []byte) (uint32, int) {
	if count == 0 {
		count = DefaultScanCount
	}
	var kb [MaxKeyLen]byte
	k := kb[:copy(kb[:], key)]
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: k})
	if err != nil {
		return StatusBadRequest, wire.HeaderLen
	}
	h := fnv.New64a()
	var keys, bytes uint32
	for ok := it.First(); ok && keys < count; ok = it.Next() {
		v := it.Value()
		h.Write(v)
		keys++
		bytes += uint32(len(v))
	}
	it.Close()
	if len(out) < wire.HeaderLen+16 {
		return StatusOK, wire.HeaderLen
	}
	binary.LittleEndian.PutUint32(out[wire.HeaderLen:], keys)
	binary.LittleEndian.PutUint32(out[wire.HeaderLen+4:], bytes)
	binary.LittleEndian.PutUint64(out[wire.HeaderLen+8:], h.Sum64())
	return StatusOK, wire.HeaderLen + 16
}

// Classifier is the kv native classifier: GET (10) and SCAN (11) in the
// psp-header type space when the request parses, Unknown otherwise. It is
// safe for concurrent use and allocates nothing.
type Classifier struct{}

// ClassifyBatch implements app.Classifier.
func (Classifier) ClassifyBatch(payloads [][]byte, out []app.Type) {
	for i, p := range payloads {
		if r, err := Parse(p); err == nil {
			out[i] = app.Type(r.Op)
		} else {
			out[i] = app.Unknown
		}
	}
}
