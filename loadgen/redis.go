package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/persephone-go/psp/internal/resp"
	"github.com/persephone-go/psp/workload"
)

// FormatRedis is Redis's protocol (RESP2) over TCP, for psp serve --app
// redis or a redis-server: each request is one command chosen by its
// type's name (see RedisMix), keys drawn from the request id among
// "key:0" to "key:<RedisKeys-1>". A reply is read whole; an error reply
// counts as ErrorReplies, except BUSY (psp's answer to a command it shed),
// counted as Overloaded.
const FormatRedis = "redis"

// Bounds and defaults of the redis format.
const (
	DefaultRedisKeys  = 100000
	MaxRedisKeys      = 100_000_000
	MaxRedisValueSize = 1 << 20
	// RedisCollection is the size of the sorted set "zset" and the list
	// "list" PreloadRedis stores, which ZRANGE and LRANGE read.
	RedisCollection = 10000
)

// Redis commands, per workload type (redisCmd.kind).
const (
	rdGet = iota
	rdSet
	rdIncr
	rdPing
	rdMget
	rdScan
	rdKeys
	rdZrange
	rdLrange
)

// redisCmd is a type's command: its kind and its size argument (keys of
// an MGET, COUNT of a SCAN, members of a ZRANGE or LRANGE).
type redisCmd struct {
	kind uint8
	n    int
}

// redisCommandNames lists the commands of a mix, for help and errors.
const redisCommandNames = "get, set, incr, ping, mget<N>, scan<COUNT>, keys, zrange<N>, lrange<N>"

// parseRedisCommand reads a type name: a command, with a size for those
// that take one (scan10000: SCAN 0 COUNT 10000; zrange100: ZRANGE zset 0
// 99; mget10: MGET of 10 keys).
func parseRedisCommand(name string) (redisCmd, error) {
	u := strings.ToUpper(name)
	base := strings.TrimRight(u, "0123456789")
	n := 0
	if digits := u[len(base):]; digits != "" {
		v, err := strconv.Atoi(digits)
		if err != nil || v < 1 || v > 1<<24 {
			return redisCmd{}, fmt.Errorf("type %q in the redis format: size %q: %w (want 1..%d)", name, digits, ErrBadSpec, 1<<24)
		}
		n = v
	}
	sized := map[string]uint8{"MGET": rdMget, "SCAN": rdScan, "ZRANGE": rdZrange, "LRANGE": rdLrange}
	plain := map[string]uint8{"GET": rdGet, "SET": rdSet, "INCR": rdIncr, "PING": rdPing, "KEYS": rdKeys}
	if k, ok := plain[base]; ok && n == 0 {
		return redisCmd{kind: k}, nil
	}
	if k, ok := sized[base]; ok {
		if n == 0 {
			n = 10 // SCAN's default COUNT; 10 keys or members for the others
		}
		return redisCmd{kind: k, n: n}, nil
	}
	return redisCmd{}, fmt.Errorf("type %q in the redis format: %w (want one of %s)", name, ErrBadSpec, redisCommandNames)
}

// redisCommands maps each schedule type to a command.
func redisCommands(sched *Schedule) ([]redisCmd, error) {
	cmds := make([]redisCmd, len(sched.Types))
	for i, t := range sched.Types {
		c, err := parseRedisCommand(t.Name)
		if err != nil {
			return nil, err
		}
		cmds[i] = c
	}
	return cmds, nil
}

// RedisMix builds a workload from a command mix, "get:0.99,scan10000:0.01"
// (see FormatRedis): each command a type, with its share and a nominal
// service time (redis-server's on this project's machines: about a
// microsecond for a single-key command, 0.47 µs a key or member for the
// others).
func RedisMix(mix string) (workload.Workload, error) {
	name := "redis " + mix
	if len(name) > workload.MaxNameLen {
		name = name[:workload.MaxNameLen]
	}
	w := workload.Workload{Name: name}
	for i, part := range strings.Split(mix, ",") {
		name, share, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			return workload.Workload{}, fmt.Errorf("redis mix %q: %q: %w (want COMMAND:SHARE, e.g. get:0.99,scan10000:0.01)", mix, part, ErrBadSpec)
		}
		c, err := parseRedisCommand(name)
		if err != nil {
			return workload.Workload{}, err
		}
		f, err := strconv.ParseFloat(share, 64)
		if err != nil || !(f > 0) {
			return workload.Workload{}, fmt.Errorf("redis mix %q: share %q: %w (want a number > 0)", mix, share, ErrBadSpec)
		}
		ns := time.Microsecond
		switch c.kind {
		case rdMget, rdScan, rdZrange, rdLrange:
			ns += time.Duration(c.n) * 470
		case rdKeys:
			ns = 18 * time.Millisecond
		}
		w.Types = append(w.Types, workload.TypeSpec{Name: strings.ToUpper(name), ID: uint32(i + 1), Share: f,
			Service: workload.Dist{Kind: workload.Fixed, Value: workload.Duration(ns)}})
	}
	if err := w.Validate(); err != nil {
		return workload.Workload{}, fmt.Errorf("redis mix %q: %w", mix, err)
	}
	return w, nil
}

func appendBulkInt(b []byte, v int64) []byte {
	var d [20]byte
	return resp.AppendBulk(b, strconv.AppendInt(d[:0], v, 10))
}

func appendArrayLen(b []byte, n int) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

// appendRedisKey appends key number k as a bulk string ("key:" and its
// decimal digits).
func appendRedisKey(b []byte, k uint64) []byte {
	var d [24]byte
	return resp.AppendBulk(b, strconv.AppendUint(append(d[:0], "key:"...), k, 10))
}

// redisStream is the redis format over TCP.
type redisStream struct{}

func (redisStream) encode(r *run, b []byte, id int) []byte {
	c := r.rdCmds[r.sched.Requests[id].Type]
	keys := uint64(r.spec.RedisKeys)
	key := mix64(uint64(id)) % keys
	switch c.kind {
	case rdGet:
		b = resp.AppendBulk(appendArrayLen(b, 2), "GET")
		return appendRedisKey(b, key)
	case rdSet:
		b = resp.AppendBulk(appendArrayLen(b, 3), "SET")
		return resp.AppendBulk(appendRedisKey(b, key), r.rdValue)
	case rdIncr:
		b = resp.AppendBulk(appendArrayLen(b, 2), "INCR")
		return appendRedisKey(b, key)
	case rdPing:
		return resp.AppendBulk(appendArrayLen(b, 1), "PING")
	case rdMget:
		b = resp.AppendBulk(appendArrayLen(b, 1+c.n), "MGET")
		for j := range c.n {
			b = appendRedisKey(b, mix64(uint64(id)*uint64(c.n)+uint64(j))%keys)
		}
		return b
	case rdScan:
		b = resp.AppendBulk(appendArrayLen(b, 4), "SCAN")
		b = resp.AppendBulk(resp.AppendBulk(b, "0"), "COUNT")
		return appendBulkInt(b, int64(c.n))
	case rdKeys:
		return resp.AppendBulk(resp.AppendBulk(appendArrayLen(b, 2), "KEYS"), "*")
	case rdZrange:
		b = resp.AppendBulk(appendArrayLen(b, 4), "ZRANGE")
		b = resp.AppendBulk(resp.AppendBulk(b, "zset"), "0")
		return appendBulkInt(b, int64(c.n-1))
	default: // rdLrange
		b = resp.AppendBulk(appendArrayLen(b, 4), "LRANGE")
		b = resp.AppendBulk(resp.AppendBulk(b, "list"), "0")
		return appendBulkInt(b, int64(c.n-1))
	}
}

func (redisStream) reply(_ *run, rd *bufio.Reader, _ int) (int, error) {
	line, err := rd.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if line[0] == '-' {
		if bytes.HasPrefix(line, redisBusy) {
			return replyOverloaded, nil
		}
		return replyError, nil
	}
	if err := skipRESP(rd, line, 0); err != nil {
		return 0, err
	}
	return replyAnswer, nil
}

var redisBusy = []byte("-BUSY")

// skipRESP reads the rest of the reply whose first line is line.
func skipRESP(rd *bufio.Reader, line []byte, depth int) error {
	if len(line) < 3 || line[len(line)-2] != '\r' || depth > 16 {
		return fmt.Errorf("redis reply line %q", line)
	}
	switch line[0] {
	case '+', '-', ':':
		return nil
	case '$', '*':
		n, err := strconv.Atoi(string(line[1 : len(line)-2]))
		if err != nil {
			return fmt.Errorf("redis reply line %q", line)
		}
		if line[0] == '$' {
			if n >= 0 {
				_, err = rd.Discard(n + 2)
			}
			return err
		}
		for range n {
			l, err := rd.ReadSlice('\n')
			if err != nil {
				return err
			}
			if err := skipRESP(rd, l, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("redis reply line %q", line)
}

// PreloadRedis stores what a redis-format run reads on the server at addr
// (host:port): keys "key:0" to "key:<keys-1>" with values of valueSize
// bytes, the sorted set "zset" and the list "list" of RedisCollection
// members each, after FLUSHALL. Commands are pipelined in windows on one
// connection.
func PreloadRedis(ctx context.Context, addr string, keys, valueSize int) error {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("preload: dial %s: %w", addr, err)
	}
	defer c.Close()
	rd := bufio.NewReader(c)
	value := bytes.Repeat([]byte{'v'}, valueSize)
	send := func(req []byte, replies int) error {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("preload: %w", err)
		}
		c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Write(req); err != nil {
			return fmt.Errorf("preload: %s: %w", addr, err)
		}
		for range replies {
			line, err := rd.ReadSlice('\n')
			if err == nil && line[0] == '-' {
				err = errors.New(string(bytes.TrimSpace(line)))
			}
			if err == nil {
				err = skipRESP(rd, line, 0)
			}
			if err != nil {
				return fmt.Errorf("preload: %s: %w", addr, err)
			}
		}
		return nil
	}
	if err := send(resp.AppendBulk(appendArrayLen(nil, 1), "FLUSHALL"), 1); err != nil {
		return err
	}
	const batch, window = 100, 64
	var req []byte
	for next := 0; next < keys; {
		req = req[:0]
		n := 0
		for ; next < keys && n < window; n++ {
			m := min(batch, keys-next)
			req = resp.AppendBulk(appendArrayLen(req, 1+2*m), "MSET")
			for range m {
				req = resp.AppendBulk(appendRedisKey(req, uint64(next)), value)
				next++
			}
		}
		if err := send(req, n); err != nil {
			return err
		}
	}
	for _, c := range []struct{ cmd, key string }{{"ZADD", "zset"}, {"RPUSH", "list"}} {
		for next := 0; next < RedisCollection; {
			m := min(1000, RedisCollection-next)
			req = req[:0]
			if c.cmd == "ZADD" {
				req = resp.AppendBulk(resp.AppendBulk(appendArrayLen(req, 2+2*m), c.cmd), c.key)
				for range m {
					req = resp.AppendBulk(appendBulkInt(req, int64(next)), []byte("member:"+strconv.Itoa(next)))
					next++
				}
			} else {
				req = resp.AppendBulk(resp.AppendBulk(appendArrayLen(req, 2+m), c.cmd), c.key)
				for range m {
					req = resp.AppendBulk(req, []byte("element:"+strconv.Itoa(next)))
					next++
				}
			}
			if err := send(req, 1); err != nil {
				return err
			}
		}
	}
	return nil
}
