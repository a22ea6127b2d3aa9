package redis

import (
	"bytes"
	"sort"
	"strings"
	"time"

	"github.com/persephone-go/psp/nic"
)

// ctx is one command being run.
type ctx struct {
	s          *Server
	w          *worker
	conn       *Conn // nil for a request not cut from a stream
	argv       [][]byte
	clk        cmdClock // the command's time
	o          *out
	cmd        *command
	replyFlags nic.Flags
	reap       bool // an expired key was read: delete it when done
	// inExec: the command runs in EXEC, where a blocking command answers
	// as if its timeout had passed (redis-server's CLIENT_DENY_BLOCKING).
	inExec bool
	// resumed: the command's request was parked and runs again
	// (nic.Resumed); parked: the command parked it (blocking.go).
	resumed, parked bool
	// waiting: the command's client is blocked already (resumed, or
	// served by a write): its pop passes over keys of another type.
	// delivered: it sent the answer a write kept for it, having written
	// nothing itself.
	waiting, delivered bool
}

// cmdClock is a command's time, unix ms, read from the server's clock
// the first time the command needs it: most commands touch no key with an
// expiry, and a clock read is a system call on some virtual machines.
type cmdClock struct {
	read func() time.Time
	ms   int64 // 0: not read yet
}

func (k *cmdClock) now() int64 {
	if k.ms == 0 {
		k.ms = k.read().UnixMilli()
	}
	return k.ms
}

// now returns the command's time, unix ms.
func (c *ctx) now() int64 { return c.clk.now() }

// Command flags psp acts on (the rest are only shown by COMMAND).
const (
	flagWrite = 1 << iota
	flagDenyOOM
	flagReadonly // changes nothing a later command could see
)

// command is one command (or subcommand) of the table.
type command struct {
	name      string // lower case
	fullname  string // "client|setname" for a subcommand
	arity     int    // > 0: exactly; < 0: at least -arity
	flagNames []string
	flags     int
	firstKey  int
	lastKey   int
	step      int
	group     string
	summary   string
	since     string
	acl       []string
	refused   bool   // known, not implemented: refused with an error saying so
	tips      string // RESP, as redis-server sends it
	keySpecs  string // RESP, as redis-server sends it
	run       func(*ctx)
	subs      map[string]*command
	// batchArgs: consecutive requests of this command with at most this
	// many arguments (its name included) are batched (Conn.batch); 0:
	// never.
	batchArgs int
	// id indexes the workers' cmdStats (INFO commandstats).
	id int
}

// batchArgs are the commands that are batched, and their most arguments:
// commands of one key whose work does not grow with the size of a
// collection (no ranges, no counts, no walks), with a few arguments (a
// variadic one with two or three elements at most).
var batchArgs = map[string]int{
	"get": 2, "set": 5, "setnx": 3, "getset": 3, "append": 3, "strlen": 2, "exists": 2,
	"incr": 2, "decr": 2, "incrby": 3, "decrby": 3, "ttl": 2, "pttl": 2, "type": 2, "expire": 4,
	"lpush": 5, "rpush": 5, "lpop": 2, "rpop": 2, "llen": 2,
	"sadd": 5, "srem": 5, "spop": 2, "sismember": 3, "scard": 2,
	"hset": 6, "hget": 3, "hincrby": 4, "hexists": 3, "hlen": 2,
	"zadd": 6, "zscore": 3, "zincrby": 4, "zpopmin": 2, "zpopmax": 2, "zcard": 2,
	"ping": 2,
}

// lookup finds argv's command as redis-server does: the command by its
// name, case-insensitively, and for a container (CLIENT, CONFIG, ...)
// given more than its name, the subcommand named by argv[1] (nil when
// there is none). It reports whether argv[0] names a container.
func (s *Server) lookup(argv [][]byte, last *lastCommand) (cmd *command, container bool) {
	base := last.find(s.cmds, argv[0])
	if base == nil {
		return nil, false
	}
	if len(argv) == 1 || base.subs == nil {
		return base, base.subs != nil
	}
	return findCommand(base.subs, argv[1]), true
}

// lastCommand remembers the command a name was last found to be, for a
// goroutine of its own: pipelined requests mostly repeat one command, and
// comparing the name costs less than folding its case and looking it up
// (BenchmarkRequestPath).
type lastCommand struct {
	name [24]byte
	n    int // 0: none yet
	cmd  *command
}

// find is findCommand(m, name), m being the table the earlier finds
// looked in.
func (l *lastCommand) find(m map[string]*command, name []byte) *command {
	if l.n == len(name) && string(l.name[:l.n]) == string(name) {
		return l.cmd
	}
	cmd := findCommand(m, name)
	if cmd != nil && len(name) <= len(l.name) {
		l.n = copy(l.name[:], name)
		l.cmd = cmd
	}
	return cmd
}

// findCommand looks name up case-insensitively without allocating.
func findCommand(m map[string]*command, name []byte) *command {
	var buf [24]byte
	if len(name) > len(buf) {
		return nil
	}
	for i, c := range name {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return m[string(buf[:len(name)])]
}

// run checks and runs the command in c.argv, as redis-server's
// processCommand does: an unknown command or subcommand, a wrong number
// of arguments, then the memory limit, answered with its errors (which
// also make a transaction's EXEC discard it); in a transaction, the
// command is queued instead of run (multi.go).
func (s *Server) run(c *ctx) {
	c.w.stats.commands.Add(1)
	cmd, container := s.lookup(c.argv, &c.w.last)
	if cmd == nil {
		name := cstr(c.argv[0])
		if equalFold(name, "host:") || equalFold(name, "post") {
			// An HTTP request: closed unanswered, as redis-server's
			// securityWarningCommand frees the client at once, with
			// the replies it had not yet written (those of the
			// requests read with this one).
			c.replyFlags |= nic.ReplyClose | nic.ReplyDiscardHeld
			return
		}
		c.w.stats.errors.Add(1)
		c.flagTransaction()
		if container {
			c.o.errBytes(unknownSubcommand(c.argv))
		} else {
			c.o.errBytes(unknownCommand(c.argv))
		}
		return
	}
	if (cmd.arity > 0 && cmd.arity != len(c.argv)) || len(c.argv) < -cmd.arity {
		c.w.stats.errors.Add(1)
		c.reject(cmd, "wrong number of arguments for '"+cmd.fullname+"' command")
		return
	}
	inMulti, queuedDenyOOM := c.conn.transaction()
	queue := inMulti && !runsInMulti(cmd.fullname)
	if s.overMaxMemory() && (cmd.flags&flagDenyOOM != 0 || queue || (cmd.fullname == "exec" && queuedDenyOOM)) {
		// In a transaction nothing more is queued past maxmemory, and
		// EXEC of a queue that may grow the dataset is refused.
		c.w.stats.oom.Add(1)
		c.reject(cmd, errOOM[:len(errOOM)-2])
		return
	}
	if c.subscribedOnly(cmd) {
		return
	}
	if queue {
		// A command psp refuses is queued too: its refusal is its reply
		// in EXEC's array, where redis-server's would be its error.
		c.enqueue(cmd)
		return
	}
	s.call(c, cmd)
}

// reject answers a command refused before it runs, as redis-server's
// rejectCommand: the error, and a transaction open is discarded at EXEC;
// EXEC itself refused discards it at once, saying why.
func (c *ctx) reject(cmd *command, msg string) {
	c.w.cmdStats[cmd.id].rejected.Add(1)
	c.flagTransaction()
	if cmd.fullname != "exec" {
		c.o.err(msg)
		return
	}
	if c.conn != nil {
		c.conn.discardTransaction()
	}
	c.o.err("-EXECABORT Transaction discarded because of: " + strings.TrimPrefix(msg, "-"))
}

// call runs a checked command.
func (s *Server) call(c *ctx, cmd *command) {
	c.cmd = cmd
	if c.conn != nil {
		c.conn.lastCmd.Store(cmd)
	}
	start := len(c.o.buf)
	cmd.run(c)
	if !c.parked {
		// Counted once, when a parked command runs again; failed: it
		// answered an error (what a chunk sent held is no error).
		st := &c.w.cmdStats[cmd.id]
		st.calls.Add(1)
		if len(c.o.buf) > start && c.o.buf[start] == '-' {
			st.failed.Add(1)
		}
	}
	if c.reap {
		s.reapExpired(c)
	}
	if cmd.flags&flagWrite != 0 && !c.parked && !c.delivered && s.blocked.n.Load() > 0 {
		c.signalWrites()
	}
	if !c.inExec && len(c.w.ready.ends) > 0 {
		// Before the command's reply leaves, as redis-server serves
		// blocked clients after each command (EXEC: after the whole
		// transaction).
		s.serveReady(c.w)
	}
}

// Shared replies.
const (
	errOOM       = "-OOM command not allowed when used memory > 'maxmemory'.\r\n"
	errWrongType = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
	errSyntax    = "-ERR syntax error\r\n"
	errNotInt    = "-ERR value is not an integer or out of range\r\n"
	errNotFloat  = "-ERR value is not a valid float\r\n"
	errNoKey     = "-ERR no such key\r\n"
	errRange     = "-ERR index out of range\r\n"
	emptyArray   = "*0\r\n"
	emptyScan    = "*2\r\n$1\r\n0\r\n*0\r\n"
	czero        = ":0\r\n"
	cone         = ":1\r\n"
	emptyBulk    = "$0\r\n\r\n"
	nullBulk     = "$-1\r\n"
	nullArray    = "*-1\r\n"
	// The empty map and set, as RESP3 writes them (out.shared writes
	// them *0 in RESP2).
	emptyMap = "%0\r\n"
	emptySet = "~0\r\n"
	okReply  = "+OK\r\n"
)

// unknownCommand is redis-server's error for an unknown command: the name
// and the first arguments, each cut at a NUL byte and at 128 bytes in all,
// line ends turned into spaces.
func unknownCommand(argv [][]byte) []byte {
	var args []byte
	for i := 1; i < len(argv) && len(args) < 128; i++ {
		a := cstr(argv[i])
		a = a[:min(len(a), 128-len(args))]
		args = append(append(append(args, '\''), a...), '\'', ' ')
	}
	name := cstr(argv[0])
	name = name[:min(len(name), 128)]
	msg := append([]byte("unknown command '"), name...)
	msg = append(append(msg, "', with args beginning with: "...), args...)
	return mapLineEnds(msg)
}

// unknownSubcommand is redis-server's error for an unknown subcommand of a
// container.
func unknownSubcommand(argv [][]byte) []byte {
	sub := cstr(argv[1])
	sub = sub[:min(len(sub), 128)]
	msg := append([]byte("unknown subcommand '"), sub...)
	msg = append(append(msg, "'. Try "...), bytes.ToUpper(cstr(argv[0]))...)
	return mapLineEnds(append(msg, " HELP."...))
}

// mapLineEnds replaces \r and \n with spaces, as redis-server does in the
// error replies it builds from arguments.
func mapLineEnds(p []byte) []byte {
	for i, c := range p {
		if c == '\r' || c == '\n' {
			p[i] = ' '
		}
	}
	return p
}

// cstr is p as redis-server reads an argument as a C string: up to its
// first NUL byte.
func cstr(p []byte) []byte {
	if i := bytes.IndexByte(p, 0); i >= 0 {
		return p[:i]
	}
	return p
}

// equalFold reports whether p equals s ignoring ASCII case (strcasecmp),
// p read as a C string.
func equalFold(p []byte, s string) bool {
	p = cstr(p)
	if len(p) != len(s) {
		return false
	}
	for i := range p {
		a, b := p[i], s[i]
		if a >= 'A' && a <= 'Z' {
			a += 'a' - 'A'
		}
		if b >= 'A' && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// commandTable builds the command table from the commands' descriptions
// and runners: by lower-case name, and sorted by name.
func commandTable() (map[string]*command, []*command) {
	specs, runners := commandSpecs(), commandRunners()
	for _, name := range refusedCommands() {
		runners[name] = cmdRefused
	}
	refused := make(map[string]bool)
	for _, name := range refusedCommands() {
		refused[name] = true
	}
	m := make(map[string]*command)
	for full, spec := range specs {
		if strings.Contains(full, "|") {
			continue
		}
		c := spec
		c.fullname, c.run, c.refused = full, runners[full], refused[full]
		c.flags = flagBits(c.flagNames)
		c.batchArgs = batchArgs[full]
		if full == "ping" || full == "echo" {
			c.flags |= flagReadonly
		}
		m[full] = &c
	}
	for full, spec := range specs {
		parent, _, ok := strings.Cut(full, "|")
		if !ok {
			continue
		}
		p := m[parent]
		if p.subs == nil {
			p.subs = make(map[string]*command)
		}
		c := spec
		c.fullname, c.run = full, runners[full]
		if c.run == nil && p.refused {
			// A subcommand of a refused container psp does not run.
			c.run, c.refused = cmdRefused, true
		}
		c.flags = flagBits(c.flagNames)
		p.subs[c.name] = &c
	}
	all := make([]*command, 0, len(m))
	for _, c := range m {
		all = append(all, c)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].name < all[j].name })
	for i, c := range statsOrder(all) {
		c.id = i
	}
	return m, all
}

// statsOrder lists the commands and their subcommands by full name, the
// order of their ids and of INFO commandstats.
func statsOrder(all []*command) []*command {
	var list []*command
	for _, c := range all {
		list = append(list, c)
		for _, sub := range c.subs {
			list = append(list, sub)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].fullname < list[j].fullname })
	return list
}

func flagBits(names []string) int {
	bits := 0
	for _, n := range names {
		switch n {
		case "write":
			bits |= flagWrite
		case "denyoom":
			bits |= flagDenyOOM
		case "readonly":
			bits |= flagReadonly
		}
	}
	return bits
}
