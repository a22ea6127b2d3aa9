package redis

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/persephone-go/psp/nic"
)

// Version is the redis-server version psp answers as (HELLO, INFO): the
// one whose replies it reproduces.
const Version = "7.0.15"

// refusedCommands are the commands psp knows and refuses, saying why:
// scripts.
func refusedCommands() []string {
	return []string{"eval", "evalsha", "eval_ro",
		"evalsha_ro", "fcall", "fcall_ro", "script", "function"}
}

// commandRunners maps each command's full name to what runs it.
func commandRunners() map[string]func(*ctx) {
	return map[string]func(*ctx){
		// Connection and server.
		"ping": cmdPing, "echo": cmdEcho, "select": cmdSelect, "quit": cmdQuit,
		"hello": cmdHello, "auth": cmdAuth, "reset": cmdReset, "time": cmdTime,
		"client|id": cmdClientID, "client|setname": cmdClientSetname,
		"client|getname": cmdClientGetname, "client|setinfo": cmdClientSetinfo,
		"client|info": cmdClientInfo, "client|list": cmdClientList, "client|help": cmdClientHelp, "client|unblock": cmdClientUnblock,
		"client|reply": cmdClientReply, "command": cmdCommand, "command|count": cmdCommandCount, "command|info": cmdCommandInfo,
		"command|docs": cmdCommandDocs, "command|list": cmdCommandList, "command|help": cmdCommandHelp,
		"info": cmdInfo, "config|get": cmdConfigGet, "config|set": cmdConfigSet,
		"config|resetstat": cmdConfigResetstat, "config|rewrite": cmdConfigRewrite, "config|help": cmdConfigHelp,
		"function|flush": cmdFunctionFlush, "function|list": cmdFunctionList,
		"memory|usage": cmdMemoryUsage, "memory|help": cmdMemoryHelp,
		"object|refcount": cmdObject, "object|freq": cmdObject, "object|encoding": cmdObject,
		"object|idletime": cmdObject, "object|help": cmdObjectHelp,
		"multi": cmdMulti, "exec": cmdExec, "discard": cmdDiscard, "watch": cmdWatch, "unwatch": cmdUnwatch,
		// Pub/sub.
		"subscribe": cmdSubscribe, "unsubscribe": cmdUnsubscribe, "psubscribe": cmdPsubscribe,
		"punsubscribe": cmdPunsubscribe, "publish": cmdPublish, "pubsub|channels": cmdPubsubChannels,
		"pubsub|numsub": cmdPubsubNumsub, "pubsub|numpat": cmdPubsubNumpat, "pubsub|help": cmdPubsubHelp,
		"pubsub|shardchannels": cmdPubsubShardchannels, "pubsub|shardnumsub": cmdPubsubShardnumsub,
		"dbsize": cmdDbsize, "flushdb": cmdFlush, "flushall": cmdFlush,
		// Keys.
		"del": cmdDel, "unlink": cmdDel, "exists": cmdExists, "touch": cmdExists, "type": cmdType,
		"expire": cmdExpire, "pexpire": cmdExpire, "expireat": cmdExpire, "pexpireat": cmdExpire,
		"ttl": cmdTTL, "pttl": cmdTTL, "persist": cmdPersist, "rename": cmdRename,
		"renamenx": cmdRename, "keys": cmdKeys, "scan": cmdScan, "randomkey": cmdRandomkey,
		"copy": cmdCopy, "expiretime": cmdExpiretime, "pexpiretime": cmdExpiretime,
		// Strings.
		"get": cmdGet, "set": cmdSet, "setnx": cmdSetnx, "setex": cmdSetex, "psetex": cmdSetex,
		"getset": cmdGetset, "getdel": cmdGetdel, "getex": cmdGetex, "mget": cmdMget,
		"mset": cmdMset, "msetnx": cmdMset, "append": cmdAppend, "strlen": cmdStrlen,
		"incr": cmdIncr, "decr": cmdIncr, "incrby": cmdIncr, "decrby": cmdIncr,
		"incrbyfloat": cmdIncrbyfloat, "getrange": cmdGetrange, "substr": cmdGetrange,
		"setrange": cmdSetrange, "lcs": cmdLcs,
		"setbit": cmdSetbit, "getbit": cmdGetbit, "bitcount": cmdBitcount, "bitpos": cmdBitpos,
		// Lists.
		"lpush": cmdPush, "rpush": cmdPush, "lpushx": cmdPush, "rpushx": cmdPush,
		"lpop": cmdPop, "rpop": cmdPop, "llen": cmdLlen, "lrange": cmdLrange,
		"lindex": cmdLindex, "lset": cmdLset, "lrem": cmdLrem, "ltrim": cmdLtrim,
		"linsert": cmdLinsert, "lpos": cmdLpos, "lmove": cmdLmove, "rpoplpush": cmdLmove,
		"lmpop": cmdLmpop,
		"blpop": cmdBpop, "brpop": cmdBpop, "blmove": cmdBlmove, "brpoplpush": cmdBlmove, "blmpop": cmdBlmpop,
		"bzpopmin": cmdBzpop, "bzpopmax": cmdBzpop, "bzmpop": cmdBzmpop,
		// Hashes.
		"hset": cmdHset, "hmset": cmdHset, "hsetnx": cmdHsetnx, "hget": cmdHget,
		"hmget": cmdHmget, "hdel": cmdHdel, "hlen": cmdHlen, "hstrlen": cmdHstrlen,
		"hgetall": cmdHgetall, "hkeys": cmdHgetall, "hvals": cmdHgetall,
		"hexists": cmdHexists, "hincrby": cmdHincrby, "hincrbyfloat": cmdHincrbyfloat,
		"hscan": cmdHscan,
		// Sets.
		"sadd": cmdSadd, "srem": cmdSrem, "smembers": cmdSmembers, "sismember": cmdSismember,
		"smismember": cmdSmismember, "scard": cmdScard, "spop": cmdSpop,
		"srandmember": cmdSrandmember, "sscan": cmdSscan,
		"sinter": cmdSinter, "sintercard": cmdSintercard, "sinterstore": cmdSinterstore,
		"sunion": cmdSunion, "sdiff": cmdSunion, "sunionstore": cmdSunionstore,
		"sdiffstore": cmdSunionstore, "smove": cmdSmove,
		// Sorted sets.
		"xadd": cmdXadd, "xlen": cmdXlen, "xrange": cmdXrange, "xrevrange": cmdXrevrange,
		"xdel": cmdXdel, "xtrim": cmdXtrim, "xread": cmdXread, "xsetid": cmdXsetid,
		"zadd": cmdZadd, "zincrby": cmdZadd, "zrem": cmdZrem, "zscore": cmdZscore, "zcard": cmdZcard,
		"zrank": cmdZrank, "zrevrank": cmdZrank, "zrange": cmdZrange, "zrevrange": cmdZrange,
		"zrangebyscore": cmdZrange, "zrevrangebyscore": cmdZrange, "zcount": cmdZcount,
		"zpopmin": cmdZpop, "zpopmax": cmdZpop, "zscan": cmdZscan,
		"zrangebylex": cmdZrange, "zrevrangebylex": cmdZrange, "zrangestore": cmdZrange,
		"zlexcount": cmdZlexcount, "zremrangebyrank": cmdZremrange, "zremrangebyscore": cmdZremrange,
		"zremrangebylex": cmdZremrange, "zmscore": cmdZmscore, "zrandmember": cmdZrandmember,
		"zunion": cmdZsetop, "zinter": cmdZsetop, "zdiff": cmdZsetop, "zunionstore": cmdZsetop,
		"zinterstore": cmdZsetop, "zdiffstore": cmdZsetop, "zintercard": cmdZsetop, "zmpop": cmdZmpop,
		"hrandfield": cmdHrandfield,
	}
}

func cmdPing(c *ctx) {
	if c.conn != nil && !c.o.resp3 && c.conn.subs.Load() > 0 && len(c.argv) <= 2 {
		// A subscribed RESP2 connection: an array, as a message is.
		c.o.arrayLen(2)
		c.o.bulkString("pong")
		if len(c.argv) == 1 {
			c.o.bulkString("")
		} else {
			c.o.bulk(c.argv[1])
		}
		return
	}
	switch len(c.argv) {
	case 1:
		c.o.writeString("+PONG\r\n")
	case 2:
		c.o.bulk(c.argv[1])
	default:
		c.o.err("wrong number of arguments for 'ping' command")
	}
}

func cmdEcho(c *ctx) { c.o.bulk(c.argv[1]) }

// cmdSelect: psp has one database, as redis-server with "databases 1".
func cmdSelect(c *ctx) {
	id, ok := c.intArg(1)
	if !ok {
		return
	}
	if id < -1<<31 || id > 1<<31-1 {
		c.o.err("value is out of range, value must between -2147483648 and 2147483647")
		return
	}
	if id != 0 {
		c.o.err("DB index is out of range")
		return
	}
	c.o.ok()
}

func cmdQuit(c *ctx) {
	c.o.ok()
	c.replyFlags |= nic.ReplyClose
}

// cmdHello switches the connection to the protocol asked for (RESP2 or
// RESP3; none: the connection's own) and answers redis-server's map in it.
func cmdHello(c *ctx) {
	next, ver := 1, int64(0)
	if len(c.argv) >= 2 {
		v, ok := string2ll(c.argv[1])
		if !ok {
			c.o.err("Protocol version is not an integer or out of range")
			return
		}
		if v < 2 || v > 3 {
			c.o.err("-NOPROTO unsupported protocol version")
			return
		}
		ver, next = v, 2
	}
	var name []byte
	setName := false
	for j := next; j < len(c.argv); j++ {
		more := len(c.argv) - 1 - j
		switch {
		case equalFold(c.argv[j], "auth") && more >= 2:
			if !authOK(c.argv[j+1]) {
				c.o.err("-WRONGPASS invalid username-password pair or user is disabled.")
				return
			}
			j += 2
		case equalFold(c.argv[j], "setname") && more >= 1:
			if !validClientName(c.argv[j+1]) {
				c.o.err("Client names cannot contain spaces, newlines or special characters.")
				return
			}
			name, setName = c.argv[j+1], true
			j++
		default:
			c.o.errBytes(append([]byte("Syntax error in HELLO option '"), append(cstr(c.argv[j]), '\'')...))
			return
		}
	}
	if setName && c.conn != nil {
		c.conn.setName(name)
	}
	if ver != 0 {
		c.o.resp3 = ver == 3
		if c.conn != nil {
			c.conn.resp3.Store(ver == 3)
		}
	}
	proto := int64(2)
	if c.o.resp3 {
		proto = 3
	}
	c.o.mapLen(7)
	c.o.bulkString("server")
	c.o.bulkString("redis")
	c.o.bulkString("version")
	c.o.bulkString(Version)
	c.o.bulkString("proto")
	c.o.integer(proto)
	c.o.bulkString("id")
	c.o.integer(int64(c.connID()))
	c.o.bulkString("mode")
	c.o.bulkString("standalone")
	c.o.bulkString("role")
	c.o.bulkString("master")
	c.o.bulkString("modules")
	c.o.writeString(emptyArray)
}

// authOK: psp has no passwords (its tenants' tokens guard its admin API),
// so, as redis-server's default user without a password, "default"
// authenticates with any password and no other user exists.
func authOK(user []byte) bool { return string(user) == "default" }

func cmdAuth(c *ctx) {
	switch len(c.argv) {
	case 2:
		c.o.err("AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
	case 3:
		if authOK(c.argv[1]) {
			c.o.ok()
		} else {
			c.o.err("-WRONGPASS invalid username-password pair or user is disabled.")
		}
	default:
		c.o.writeString(errSyntax)
	}
}

func cmdReset(c *ctx) {
	if c.conn != nil {
		c.conn.setName(nil)
		c.conn.discardTransaction()
		c.conn.resp3.Store(false)
		c.s.pubsub.leave(c.conn)
		// Replies on again, but for this one when it is skipped (as
		// redis-server's clearClientConnectionState).
		mode := c.conn.reply.Load() &^ (replyOff | replySkipNext)
		c.conn.reply.Store(mode)
		if c.o.silent && mode&replySkip == 0 {
			c.o.silence(false)
		}
	}
	c.o.resp3 = false
	c.o.simple("RESET")
}

func cmdTime(c *ctx) {
	t := c.s.now()
	c.o.arrayLen(2)
	c.o.bulkInt(t.Unix())
	c.o.bulkInt(int64(t.Nanosecond() / 1000))
}

// cmdRefused refuses what psp does not implement, saying so.
func cmdRefused(c *ctx) {
	name := strings.ToUpper(strings.ReplaceAll(c.cmd.fullname, "|", " "))
	c.o.err(name + " is not supported: psp does not run scripts")
}

// connID is the connection's CLIENT ID (0 for a request not cut from a
// stream).
func (c *ctx) connID() uint64 {
	if c.conn == nil {
		return 0
	}
	return c.conn.id
}

func validClientName(name []byte) bool {
	for _, b := range name {
		if b < '!' || b > '~' {
			return false
		}
	}
	return true
}

func (cn *Conn) setName(name []byte) {
	cn.mu.Lock()
	cn.name = string(name)
	cn.mu.Unlock()
}

func (cn *Conn) getName() string {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.name
}

func cmdClientID(c *ctx) { c.o.integer(int64(c.connID())) }

func cmdClientSetname(c *ctx) {
	if !validClientName(c.argv[2]) {
		c.o.err("Client names cannot contain spaces, newlines or special characters.")
		return
	}
	if c.conn != nil {
		c.conn.setName(c.argv[2])
	}
	c.o.ok()
}

func cmdClientGetname(c *ctx) {
	if c.conn == nil {
		c.o.null()
		return
	}
	name := c.conn.getName()
	if name == "" {
		c.o.null()
		return
	}
	c.o.bulkString(name)
}

// cmdClientSetinfo is redis-server 7.2's CLIENT SETINFO (redis-py 5 and
// other clients send it when they connect).
func cmdClientSetinfo(c *ctx) {
	attr, val := c.argv[2], c.argv[3]
	lib := equalFold(attr, "lib-name")
	if !lib && !equalFold(attr, "lib-ver") {
		c.o.errBytes(append([]byte("Unrecognized option '"), append(cstr(attr), '\'')...))
		return
	}
	for _, b := range val {
		if b < '!' || b > '~' || (lib && b == ' ') {
			c.o.errBytes(append([]byte(strings.ToUpper(string(cstr(attr)))+" cannot contain spaces, newlines or special characters."), nil...))
			return
		}
	}
	if c.conn != nil {
		c.conn.mu.Lock()
		if lib {
			c.conn.libName = string(val)
		} else {
			c.conn.libVer = string(val)
		}
		c.conn.mu.Unlock()
	}
	c.o.ok()
}

// cmdClientInfo describes the connection in CLIENT LIST's format, with the
// fields psp knows.
func cmdClientInfo(c *ctx) {
	if c.conn == nil {
		c.o.verbatim("id=0 addr= laddr= fd=0 name= age=0 idle=0 flags=N db=0 cmd=client|info user=default resp=2\n")
		return
	}
	c.o.verbatim(c.conn.infoLine(c.now()))
}

// cmdClientList answers CLIENT LIST [TYPE type | ID id ...] as
// redis-server's clientCommand: a line per open connection, in id order;
// TYPE pubsub lists the subscribed connections, normal the others, and
// the replica and master types none (psp has no replication).
func cmdClientList(c *ctx) {
	var ids map[uint64]bool
	typ := "normal"
	switch {
	case len(c.argv) == 4 && equalFold(c.argv[2], "type"):
		typ = strings.ToLower(string(c.argv[3]))
		switch typ {
		case "normal", "slave", "replica", "pubsub", "master":
		default:
			c.o.err("Unknown client type '" + string(c.argv[3]) + "'")
			return
		}
	case len(c.argv) > 3 && equalFold(c.argv[2], "id"):
		ids = make(map[uint64]bool)
		for _, a := range c.argv[3:] {
			id, ok := string2ll(a)
			if !ok {
				c.o.err("Invalid client ID")
				return
			}
			ids[uint64(id)] = true
		}
	case len(c.argv) != 2:
		c.o.writeString(errSyntax)
		return
	}
	all := len(c.argv) == 2
	var conns []*Conn
	c.s.conns.Range(func(_, v any) bool {
		cn := v.(*Conn)
		subscribed := cn.subs.Load() > 0
		if all || ids[cn.id] || (typ == "normal" && !subscribed && ids == nil) || (typ == "pubsub" && subscribed) {
			conns = append(conns, cn)
		}
		return true
	})
	slices.SortFunc(conns, func(a, b *Conn) int { return cmpUint64(a.id, b.id) })
	var b strings.Builder
	for _, cn := range conns {
		b.WriteString(cn.infoLine(c.now()))
	}
	c.o.verbatim(b.String())
}

// infoLine is the connection's line of CLIENT INFO and CLIENT LIST, in
// redis-server's fields; what psp does not track (file descriptor, buffers,
// idle time) reads 0.
func (cn *Conn) infoLine(now int64) string {
	resp, cmd := 2, "NULL"
	if cn.resp3.Load() {
		resp = 3
	}
	if last := cn.lastCmd.Load(); last != nil {
		cmd = last.fullname
	}
	flags, subs, psubs := "N", 0, 0
	if cn.subs.Load() > 0 { // a subscriber: flag P, and its subscriptions
		cn.srv.pubsub.mu.RLock()
		flags, subs, psubs = "P", len(cn.subChannels), len(cn.subPatterns)
		cn.srv.pubsub.mu.RUnlock()
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return fmt.Sprintf("id=%d addr=%s laddr= fd=0 name=%s age=%d idle=0 flags=%s db=0 sub=%d psub=%d ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd=%s user=default redir=-1 resp=%d lib-name=%s lib-ver=%s\n",
		cn.id, cn.peer, cn.name, (now-cn.created)/1000, flags, subs, psubs, cmd, resp, cn.libName, cn.libVer)
}

func writeHelp(c *ctx, lines []string) {
	c.o.arrayLen(len(lines))
	for _, l := range lines {
		c.o.simple(l)
	}
}

func cmdClientHelp(c *ctx) {
	writeHelp(c, []string{
		"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"GETNAME", "    Return the name of the current connection.",
		"ID", "    Return the ID of the current connection.",
		"INFO", "    Return information about the current client connection.",
		"LIST [options ...]", "    Return information about client connections. Options:",
		"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)", "      Return clients of specified type.",
		"REPLY (ON|OFF|SKIP)", "    Control the replies sent to the current connection.",
		"SETINFO <option> <value>", "    Set LIB-NAME or LIB-VER of the current connection.",
		"SETNAME <name>", "    Assign the name <name> to the current connection.",
		"UNBLOCK <clientid> [TIMEOUT|ERROR]", "    Unblock the specified blocked client.",
		"HELP", "    Print this help.",
	})
}

// cmdClientReply sets whether the connection's replies are sent: ON
// answers OK, OFF silences every reply from now on, SKIP the next
// command's (not when OFF). Pub/sub notices are sent all the same, as
// redis-server's pushes.
func cmdClientReply(c *ctx) {
	if c.conn == nil {
		c.o.err("CLIENT REPLY needs a connection: a datagram is one command")
		return
	}
	switch mode := c.conn.reply.Load(); {
	case equalFold(c.argv[2], "on"):
		c.conn.reply.Store(mode &^ (replySkip | replyOff))
		if c.o.silent {
			c.o.silence(false)
		}
		c.o.ok()
	case equalFold(c.argv[2], "off"):
		c.conn.reply.Store(mode | replyOff)
	case equalFold(c.argv[2], "skip"):
		if mode&replyOff == 0 {
			c.conn.reply.Store(mode | replySkipNext)
		}
	default:
		c.o.writeString(errSyntax)
	}
}

// COMMAND.

func writeCommandInfo(c *ctx, cmd *command) {
	c.o.arrayLen(10)
	c.o.bulkString(cmd.fullname)
	c.o.integer(int64(cmd.arity))
	c.o.setLen(len(cmd.flagNames))
	for _, f := range cmd.flagNames {
		c.o.simple(f)
	}
	c.o.integer(int64(cmd.firstKey))
	c.o.integer(int64(cmd.lastKey))
	c.o.integer(int64(cmd.step))
	c.o.setLen(len(cmd.acl))
	for _, a := range cmd.acl {
		c.o.simple(a)
	}
	c.o.writeShaped(cmd.tips, shapeSet)
	c.o.writeShaped(cmd.keySpecs, shapeSpecs)
	subs := sortedSubs(cmd)
	if cmd.subs == nil {
		c.o.setLen(0) // redis-server's for a command without subcommands
	} else {
		c.o.arrayLen(len(subs))
	}
	for _, sc := range subs {
		writeCommandInfo(c, sc)
	}
}

func sortedSubs(cmd *command) []*command {
	var subs []*command
	for _, sc := range cmd.subs {
		subs = append(subs, sc)
	}
	for i := 1; i < len(subs); i++ {
		for j := i; j > 0 && subs[j].name < subs[j-1].name; j-- {
			subs[j], subs[j-1] = subs[j-1], subs[j]
		}
	}
	return subs
}

func cmdCommand(c *ctx) {
	c.o.arrayLen(len(c.s.byName))
	for _, cmd := range c.s.byName {
		writeCommandInfo(c, cmd)
	}
}

func cmdCommandCount(c *ctx) { c.o.integer(int64(len(c.s.byName))) }

// lookupFull finds a command by name or by "container|sub".
func (s *Server) lookupFull(name []byte) *command {
	parent, sub, ok := strings.Cut(strings.ToLower(string(name)), "|")
	cmd := s.cmds[parent]
	if cmd == nil || !ok {
		return cmd
	}
	return cmd.subs[sub]
}

func cmdCommandInfo(c *ctx) {
	if len(c.argv) == 2 {
		cmdCommand(c)
		return
	}
	c.o.arrayLen(len(c.argv) - 2)
	for _, name := range c.argv[2:] {
		if cmd := c.s.lookupFull(name); cmd != nil {
			writeCommandInfo(c, cmd)
		} else {
			c.o.null()
		}
	}
}

// writeCommandDocs writes cmd's name and documentation: redis-server's
// (commandDocs), or for a command it does not have, its summary, version
// and group; a container's subcommands are psp's.
func writeCommandDocs(c *ctx, cmd *command) {
	c.o.bulkString(cmd.fullname)
	n := 6
	d, ok := commandDocs[cmd.fullname]
	if ok {
		n = 2 * d.fields
	}
	if cmd.subs != nil {
		n += 2
	}
	c.o.mapLen(n / 2)
	if ok {
		if c.o.resp3 {
			// The fields, read as one array (rewritten, the header
			// dropped).
			fields := "*" + strconv.Itoa(2*d.fields) + "\r\n" + d.resp
			b, _ := toRESP3(nil, []byte(fields), shapeDocs)
			c.o.write(b[bytes.IndexByte(b, '\n')+1:])
		} else {
			c.o.writeString(d.resp)
		}
	} else {
		c.o.bulkString("summary")
		c.o.bulkString(cmd.summary)
		c.o.bulkString("since")
		c.o.bulkString(cmd.since)
		c.o.bulkString("group")
		c.o.bulkString(cmd.group)
	}
	if cmd.subs != nil {
		subs := sortedSubs(cmd)
		c.o.bulkString("subcommands")
		c.o.mapLen(len(subs))
		for _, sc := range subs {
			writeCommandDocs(c, sc)
		}
	}
}

// cmdCommandDocs answers each command's documentation, as redis-server
// 7.0.15 has it (arguments, complexity, history, ...).
func cmdCommandDocs(c *ctx) {
	if len(c.argv) == 2 {
		c.o.mapLen(len(c.s.byName))
		for _, cmd := range c.s.byName {
			writeCommandDocs(c, cmd)
		}
		return
	}
	var found []*command
	for _, name := range c.argv[2:] {
		if cmd := c.s.lookupFull(name); cmd != nil {
			found = append(found, cmd)
		}
	}
	c.o.mapLen(len(found))
	for _, cmd := range found {
		writeCommandDocs(c, cmd)
	}
}

func cmdCommandList(c *ctx) {
	var names []string
	for _, cmd := range c.s.byName {
		names = append(names, cmd.fullname)
		for _, sc := range sortedSubs(cmd) {
			names = append(names, sc.fullname)
		}
	}
	if len(c.argv) > 2 {
		if len(c.argv) != 5 || !equalFold(c.argv[2], "filterby") || !equalFold(c.argv[3], "pattern") {
			c.o.writeString(errSyntax)
			return
		}
		kept := names[:0]
		for _, n := range names {
			if stringMatch(c.argv[4], []byte(n)) {
				kept = append(kept, n)
			}
		}
		names = kept
	}
	c.o.arrayLen(len(names))
	for _, n := range names {
		c.o.bulkString(n)
	}
}

func cmdCommandHelp(c *ctx) {
	writeHelp(c, []string{
		"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"(no subcommand)", "    Return details about all commands.",
		"COUNT", "    Return the total number of commands in this server.",
		"LIST", "    Return a list of all commands in this server.",
		"INFO [<command-name> ...]", "    Return details about the given commands.",
		"DOCS [<command-name> ...]", "    Return documentation details about the given commands.",
		"HELP", "    Print this help.",
	})
}

// FUNCTION: psp runs no scripts, so it holds no function libraries:
// FLUSH has none to delete and LIST none to show (test suites and
// clients call them to start clean); the other subcommands are refused.
func cmdFunctionFlush(c *ctx) {
	switch {
	case len(c.argv) > 3:
		c.o.errBytes(subcommandSyntaxError(c.argv))
	case len(c.argv) == 3 && !equalFold(c.argv[2], "sync") && !equalFold(c.argv[2], "async"):
		c.o.err("FUNCTION FLUSH only supports SYNC|ASYNC option")
	default:
		c.o.ok()
	}
}

func cmdFunctionList(c *ctx) {
	withCode, named := false, false
	for i := 2; i < len(c.argv); i++ {
		a := c.argv[i]
		switch {
		case !withCode && equalFold(a, "withcode"):
			withCode = true
		case !named && equalFold(a, "libraryname"):
			if i == len(c.argv)-1 {
				c.o.err("library name argument was not given")
				return
			}
			named = true
			i++
		default:
			c.o.errBytes(mapLineEnds(append([]byte("Unknown argument "), cstr(a)...)))
			return
		}
	}
	c.o.writeString(emptyArray)
}

// subcommandSyntaxError is redis-server's error for a subcommand given
// the wrong arguments by its own parsing.
func subcommandSyntaxError(argv [][]byte) []byte {
	sub := cstr(argv[1])
	msg := append([]byte("unknown subcommand or wrong number of arguments for '"), sub[:min(len(sub), 128)]...)
	msg = append(append(msg, "'. Try "...), bytes.ToUpper(cstr(argv[0]))...)
	return mapLineEnds(append(msg, " HELP."...))
}

// cmdMemoryUsage answers the bytes a key is counted for against
// maxmemory (its name, value and bookkeeping, as psp estimates them),
// or nil for a key that does not exist. SAMPLES is checked, as
// redis-server does, and not needed: the estimate is kept up to date.
func cmdMemoryUsage(c *ctx) {
	for j := 3; j < len(c.argv); j += 2 {
		if !equalFold(c.argv[j], "samples") || j+1 == len(c.argv) {
			c.o.writeString(errSyntax)
			return
		}
		n, ok := string2ll(c.argv[j+1])
		if !ok {
			c.o.writeString(errNotInt)
			return
		}
		if n < 0 {
			c.o.writeString(errSyntax)
			return
		}
	}
	sh, _ := c.s.db.shardOf(c.argv[2])
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	e := c.lookup(sh, c.argv[2])
	if e == nil {
		c.o.null()
		return
	}
	c.o.integer(e.size)
}

// cmdObject answers OBJECT REFCOUNT (1: psp shares no value between
// keys) and FREQ (redis-server's error when the eviction policy is not an
// LFU one, as psp's never is); it refuses ENCODING and IDLETIME, which
// describe what psp does not keep (redis-server's encodings, access
// times). A key that does not exist is nil, as redis-server answers it
// first.
func cmdObject(c *ctx) {
	sh, _ := c.s.db.shardOf(c.argv[2])
	sh.mu.RLock()
	e := c.lookup(sh, c.argv[2])
	sh.mu.RUnlock()
	if e == nil {
		c.o.null()
		return
	}
	switch c.cmd.name {
	case "refcount":
		c.o.writeString(cone)
	case "freq":
		c.o.err("An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.")
	case "encoding":
		c.o.err("OBJECT ENCODING is not supported: psp does not keep redis-server's encodings")
	default:
		c.o.err("OBJECT IDLETIME is not supported: psp does not track when keys were last read")
	}
}

func cmdObjectHelp(c *ctx) {
	writeHelp(c, []string{
		"OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"FREQ <key>",
		"    Return the access frequency index of the <key>. The returned integer is",
		"    proportional to the logarithm of the recent access frequency of the key.",
		"REFCOUNT <key>",
		"    Return the number of references of the value associated with the specified",
		"    <key>.",
		"HELP", "    Prints this help.",
	})
}

func cmdMemoryHelp(c *ctx) {
	writeHelp(c, []string{
		"MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"USAGE <key> [SAMPLES <count>]",
		"    Return memory in bytes used by <key> and its value. Nested values are",
		"    sampled up to <count> times (default: 5, 0 means sample all).",
		"HELP", "    Prints this help.",
	})
}

func cmdDbsize(c *ctx) { c.o.integer(c.s.db.keys.Load()) }

func cmdFlush(c *ctx) {
	if len(c.argv) > 2 || (len(c.argv) == 2 && !equalFold(c.argv[1], "sync") && !equalFold(c.argv[1], "async")) {
		c.o.writeString(errSyntax)
		return
	}
	c.s.db.lockAll()
	c.s.db.flush()
	c.s.db.unlockAll()
	c.o.ok()
}

// cmdInfo answers the sections clients read, in redis-server's format.
func cmdInfo(c *ctx) {
	s := c.s
	sections := map[string]bool{}
	for _, a := range c.argv[1:] {
		sections[strings.ToLower(string(a))] = true
	}
	// As redis-server's genInfoSectionDict: no argument or "default",
	// the default sections; "all" and "everything", every section
	// (commandstats too); others, those named.
	every := sections["all"] || sections["everything"]
	def := len(sections) == 0 || sections["default"] || every
	want := func(name string) bool {
		if name == "commandstats" {
			return every || sections[name]
		}
		return def || sections[name]
	}
	var b strings.Builder
	add := func(section string, kv ...string) {
		if !want(strings.ToLower(section)) {
			return
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + section + "\r\n")
		for i := 0; i+1 < len(kv); i += 2 {
			b.WriteString(kv[i] + ":" + kv[i+1] + "\r\n")
		}
	}
	st := s.infoStats()
	uptime := (c.now() - s.started.UnixMilli()) / 1000
	used := s.db.used.Load()
	i64 := func(v int64) string { return strconv.FormatInt(v, 10) }
	u64 := func(v uint64) string { return strconv.FormatUint(v, 10) }
	add("Server",
		"redis_version", Version,
		"redis_mode", "standalone",
		"os", runtime.GOOS+" "+runtime.GOARCH,
		"arch_bits", "64",
		"multiplexing_api", "psp",
		"process_id", strconv.Itoa(os.Getpid()),
		"tcp_port", strconv.Itoa(s.cfg.Port),
		"server_time_usec", i64(c.now()*1000),
		"uptime_in_seconds", i64(uptime),
		"uptime_in_days", i64(uptime/86400),
		"executable", "psp",
		"io_threads_active", "0")
	add("Clients",
		"connected_clients", u64(s.connsOpened.Load()-s.connsClosed.Load()),
		"maxclients", "0",
		"blocked_clients", i64(s.blocked.n.Load()))
	add("Memory",
		"used_memory", i64(used),
		"used_memory_human", humanBytes(used),
		"maxmemory", i64(s.maxMemory.Load()),
		"maxmemory_human", humanBytes(s.maxMemory.Load()),
		"maxmemory_policy", "noeviction")
	add("Persistence",
		"loading", "0",
		"rdb_changes_since_last_save", "0",
		"rdb_bgsave_in_progress", "0",
		"rdb_last_bgsave_status", "ok",
		"aof_enabled", "0",
		"aof_rewrite_in_progress", "0")
	add("Stats",
		"total_connections_received", u64(st.connections),
		"total_commands_processed", u64(st.commands),
		"expired_keys", i64(st.expired),
		"evicted_keys", "0",
		"keyspace_hits", u64(st.hits),
		"keyspace_misses", u64(st.misses),
		"rejected_oom_commands", u64(st.oom))
	add("Replication",
		"role", "master",
		"connected_slaves", "0",
		"master_failover_state", "no-failover",
		"master_repl_offset", "0")
	if want("cpu") {
		add("CPU", cpuUsage()...)
	}
	if want("commandstats") {
		add("Commandstats", s.commandStats()...)
	}
	add("Cluster", "cluster_enabled", "0")
	var keyspace []string
	if n := s.db.keys.Load(); n > 0 {
		keyspace = []string{"db0", fmt.Sprintf("keys=%d,expires=%d,avg_ttl=0", n, s.db.volatileKeys())}
	}
	add("Keyspace", keyspace...)
	c.o.verbatim(b.String())
}

// cpuUsage is INFO's CPU section: the process's system and user time,
// and its children's (psp has no main thread apart from its workers).
func cpuUsage() []string {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	tv := func(t syscall.Timeval) string { return fmt.Sprintf("%d.%06d", t.Sec, t.Usec) }
	return []string{
		"used_cpu_sys", tv(self.Stime),
		"used_cpu_user", tv(self.Utime),
		"used_cpu_sys_children", tv(children.Stime),
		"used_cpu_user_children", tv(children.Utime),
	}
}

// commandStats is INFO's Commandstats section: each command that ran or
// was refused, its counts summed over the workers. psp does not time
// commands (a clock read each would cost more than many commands): usec
// and usec_per_call read 0.
func (s *Server) commandStats() []string {
	var kv []string
	for _, cmd := range s.statsOrder {
		var calls, failed, rejected uint64
		for _, w := range s.workers {
			st := &w.cmdStats[cmd.id]
			calls += st.calls.Load()
			failed += st.failed.Load()
			rejected += st.rejected.Load()
		}
		if calls == 0 && failed == 0 && rejected == 0 {
			continue
		}
		kv = append(kv, "cmdstat_"+cmd.fullname,
			fmt.Sprintf("calls=%d,usec=0,usec_per_call=0.00,rejected_calls=%d,failed_calls=%d", calls, rejected, failed))
	}
	return kv
}

func humanBytes(n int64) string {
	f := float64(n)
	switch {
	case f < 1024:
		return strconv.FormatInt(n, 10) + "B"
	case f < 1024*1024:
		return strconv.FormatFloat(f/1024, 'f', 2, 64) + "K"
	case f < 1024*1024*1024:
		return strconv.FormatFloat(f/(1024*1024), 'f', 2, 64) + "M"
	}
	return strconv.FormatFloat(f/(1024*1024*1024), 'f', 2, 64) + "G"
}
