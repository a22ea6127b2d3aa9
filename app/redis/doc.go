// Package redis is a Redis-protocol application for psp: a stream
// protocol (Server implements nic.Protocol; each connection's Conn is its
// framer and session) and the handler that runs the commands it frames,
// so that Redis clients' commands are scheduled by DARC, a GET never
// waiting behind a SCAN, KEYS or long ZRANGE of another connection.
//
// # Protocol
//
// RESP2, and RESP3 on a connection after HELLO 3 (replies in redis-server
// 7.0.15's RESP3 shapes: nulls, maps, sets, doubles, nested score pairs,
// verbatim strings), as redis-server 7.0 reads it: multibulk requests and inline
// commands (quoted as its sdssplitargs quotes), pipelined, with its
// protocol errors answered in its words and the connection closed after
// them where it closes it. Replies are byte for byte redis-server
// 7.0.15's for the commands served (conformance tests send the same
// sequences to both, see package redistest): connection (PING, ECHO,
// SELECT 0, QUIT, HELLO 2 and 3, AUTH, RESET, CLIENT ID, SETNAME, GETNAME,
// SETINFO, INFO and LIST, COMMAND with COUNT, INFO, DOCS and LIST, INFO, CONFIG
// GET, DBSIZE, FLUSHDB, FLUSHALL, TIME); keys (DEL, UNLINK, EXISTS, TOUCH,
// TYPE, EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, TTL, PTTL, PERSIST, RENAME,
// RENAMENX, KEYS, SCAN, RANDOMKEY); strings (GET, SET with its options,
// MGET, MSET, MSETNX, SETNX, SETEX, PSETEX, GETSET, GETDEL, GETEX, APPEND,
// STRLEN, INCR, DECR, INCRBY, DECRBY, INCRBYFLOAT, GETRANGE, SUBSTR,
// SETRANGE, LCS); bitmaps (SETBIT, GETBIT, BITCOUNT, BITPOS); lists (LPUSH,
// RPUSH, LPUSHX, RPUSHX, LPOP, RPOP, LLEN, LRANGE, LINDEX, LSET, LREM,
// LTRIM, LINSERT, LPOS, LMOVE, RPOPLPUSH, LMPOP); hashes (HSET, HMSET, HSETNX, HGET, HMGET,
// HDEL, HLEN, HSTRLEN, HGETALL, HKEYS, HVALS, HEXISTS, HINCRBY,
// HINCRBYFLOAT, HSCAN); sets (SADD, SREM, SMEMBERS, SISMEMBER,
// SMISMEMBER, SCARD, SPOP, SRANDMEMBER, SSCAN); sorted sets (ZADD with its
// flags, ZINCRBY, ZREM, ZSCORE, ZCARD, ZRANK, ZREVRANK, ZRANGE with
// BYSCORE, REV, LIMIT and WITHSCORES, ZREVRANGE, ZRANGEBYSCORE,
// ZREVRANGEBYSCORE, ZCOUNT, ZPOPMIN, ZPOPMAX, ZSCAN); streams (XADD with
// NOMKSTREAM, MAXLEN/MINID = or ~ and LIMIT, XLEN, XRANGE, XREVRANGE,
// XDEL, XTRIM, XREAD without waiting: stream.go, cmd_stream.go). Unknown commands,
// wrong arity and WRONGTYPE are answered as redis-server answers them.
//
// # Concurrency
//
// Several workers run commands at once; each command is atomic, as a
// Redis command is. The keyspace is split into 1,024 shards by the top
// bits of each key's 64-bit hash, each with a read-write lock: a command
// holds the shards of its keys (read-locked to read) for its whole run,
// taking them in shard order (MSET, MGET, DEL, RENAME over several shards
// never deadlock and are never seen half done). Commands that walk the
// keyspace (SCAN, KEYS, RANDOMKEY) hold one shard at a time, read-locked,
// so a long KEYS delays no GET; a long command on one key (ZRANGE of a
// large sorted set) read-locks that key's shard only.
//
// SCAN's cursor is a 64-bit hash: a shard keeps its keys sorted by hash,
// a call returns the keys from the cursor on (COUNT of them, then MATCH
// and TYPE filter them, as in redis-server) and answers the hash of the
// next key. A key present from a scan's first call to its last is
// returned exactly once, however keys are added and deleted in between;
// any number is a valid cursor. HSCAN, SSCAN and ZSCAN return the whole
// collection in one call with cursor 0, as redis-server does for small
// collections.
//
// The order of replies follows redis-server's where it is defined by
// its encodings: a hash's fields in insertion order, a set of integers in
// ascending order, a sorted set by score.
//
// # Memory
//
// Config.MaxMemory bounds the dataset's estimated size: each key, value
// and element is counted with the Go structures that hold it. Past the
// bound, the commands redis-server marks denyoom are refused with its
// noeviction error ("-OOM command not allowed when used memory >
// 'maxmemory'."); reads and deletes are served. As in redis-server, the
// check comes before a command, so each worker running a command at that
// moment may add one command's data: the estimate exceeds MaxMemory by at
// most Workers times the longest request accepted (the dataplane's bound,
// or Config.MaxBulk for what SETRANGE, SETBIT and APPEND build). The process's
// memory is the dataset and the Go runtime's garbage collection headroom
// (GOGC; set GOMEMLIMIT to bound it).
//
// # Overload
//
// A command the dispatcher sheds without running it (Server implements
// app.OverloadReplier) is answered BusyReply, "-BUSY server overloaded:
// command not executed, try again later", in its turn on its connection:
// clients raise it for that command and keep the connection.
//
// # Transactions
//
// MULTI, EXEC, DISCARD, WATCH and UNWATCH are redis-server's (multi.go,
// watch.go): EXEC runs its queue while every other worker is held
// between two requests, and answers the null array, running nothing,
// when a key the connection WATCHed was modified since (where
// redis-server signals a modified key: a write that changes nothing does
// not count), flushed, or expired.
//
// # Blocking
//
// A blocking command (BLPOP, BZPOPMIN, BLMOVE, ...) none of whose keys
// holds data parks its request (app.Reply.Park; Server is the app.Parker):
// it holds no worker, its connection's later commands wait behind it, and
// it runs again when a key it waits on is written, or at its timeout
// (blocking.go).
//
// # Pub/sub
//
// SUBSCRIBE, PSUBSCRIBE and their UNSUBSCRIBEs register the connection
// under its channels and patterns; PUBLISH formats its message once per
// protocol (RESP2's array, RESP3's push) and hands it to each receiver
// through the stream dataplane's nic.Pusher (Conn is a nic.PushTaker),
// which sends it after the replies of the commands the receiver had sent,
// and closes a receiver that does not read at its output bound. RESP2's
// subscribed context, RESET and a closed connection unsubscribing are
// redis-server's (pubsub.go).
//
// # Not Redis
//
// One database (SELECT 0 only, as redis-server with databases 1); no
// scripts (EVAL, FCALL), sharded pub/sub (SSUBSCRIBE),
// persistence, replication, cluster or ACLs (AUTH accepts the default
// user, as redis-server without a password): those commands are refused
// with an error saying so. Stream consumer groups (XGROUP, XREADGROUP,
// XACK, XPENDING, XCLAIM, XAUTOCLAIM) and XINFO are unknown, and
// XREAD BLOCK answers an error where redis-server would wait. No eviction policy other than noeviction.
// CLIENT KILL and the other CLIENT
// subcommands are unknown. INFO reports psp's own figures in redis-server's
// format. Arguments are bounded by the dataplane's longest request (and
// Config.MaxBulk, 512 MB by default): a longer one is refused as soon as
// its length is known, with redis-server's "Protocol error: invalid bulk
// length" (or "invalid multibulk length" for a count of arguments that
// cannot fit), where redis-server would read on.
//
// # Use
//
// Open a Server, give it to a stream dataplane as its Protocol and to the
// dispatcher as its handler, and Close it after the dispatcher has
// stopped. Handle, HandleMulti and ReplyOverloaded are safe for
// concurrent use by the workers and the dispatcher; Frame is called by
// the dataplane's receive goroutine only.
package redis
