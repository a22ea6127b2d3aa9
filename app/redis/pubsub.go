package redis

import (
	"slices"
	"sync"

	"github.com/persephone-go/psp/internal/resp"
	"github.com/persephone-go/psp/nic"
)

// Pub/sub, as redis-server 7.0's src/pubsub.c. A subscribed connection is
// registered under each channel and pattern it listens to; PUBLISH
// formats its message once per protocol (an array in RESP2, a push in
// RESP3) and hands it to each receiver's connection through the stream
// dataplane's nic.Pusher, which sends it after the replies of the
// requests the connection sent before, as redis-server writes it to the
// client's output buffer. A receiver that does not read is closed at the
// dataplane's output bound (tcp.Config.MaxOutput), as redis-server closes
// a pubsub client past client-output-buffer-limit. A message to the
// publishing connection itself (RESP3, or in EXEC) goes into its own
// reply, before PUBLISH's count, where redis-server puts it.
//
// Unlike redis-server, which runs one command at a time, a message comes
// after the replies of the receiver's commands read when it was
// published, not only of those run: one published while the receiver's
// UNSUBSCRIBE of the channel waits its turn comes after that
// UNSUBSCRIBE's notice. An UNSUBSCRIBE of every channel and PUBSUB
// CHANNELS list the channels in byte order, and a message matching
// several patterns of one receiver comes in the order the patterns were
// first subscribed, where redis-server follows its hash tables.

// pubsubRegistry is the server's subscriptions.
type pubsubRegistry struct {
	mu       sync.RWMutex
	channels map[string][]*Conn // by channel, in the order they subscribed
	patterns map[string]*patternSubs
	pats     []*patternSubs // the patterns, in the order they were first subscribed
}

// patternSubs are the connections subscribed to one pattern.
type patternSubs struct {
	pat   []byte
	g     glob
	conns []*Conn
}

// Pub/sub message kinds, as redis-server's shared bulks.
const (
	kindSubscribe    = "subscribe"
	kindUnsubscribe  = "unsubscribe"
	kindPSubscribe   = "psubscribe"
	kindPUnsubscribe = "punsubscribe"
)

// TakePusher implements nic.PushTaker: the dataplane's way to send the
// connection the messages published to it.
func (c *Conn) TakePusher(p nic.Pusher) { c.pusher = p }

// WaitsForPush implements nic.PushWaiter: a subscribed connection is not
// closed for idleness (redis-server's timeout spares pubsub clients).
func (c *Conn) WaitsForPush() bool { return c.subs.Load() > 0 }

// subscriptions returns how many channels and patterns c listens to;
// registry's mu held.
func (c *Conn) subscriptions() int64 { return int64(len(c.subChannels) + len(c.subPatterns)) }

// pubsubHeader writes the header of a pub/sub reply of n elements: an
// array in RESP2, a push in RESP3.
func (o *out) pubsubHeader(n int) {
	if o.resp3 {
		o.aggregate('>', n)
		return
	}
	o.arrayLen(n)
}

// notify writes a (un)subscription notice: kind, the channel or pattern
// (nil: none, after an unsubscription from everything when there was
// nothing), and the connection's subscriptions now. It is written when
// the command's reply is silenced too (CLIENT REPLY), as redis-server
// sends pub/sub messages.
func (o *out) notify(kind string, name []byte, count int64) {
	silent := o.silent
	if silent {
		o.silence(false)
	}
	o.pubsubHeader(3)
	o.bulkString(kind)
	if name == nil {
		o.null()
	} else {
		o.bulk(name)
	}
	o.integer(count)
	if silent && !o.failed { // else cut: the connection closes
		o.silence(true)
	}
}

// pushable reports whether c's connection can take pub/sub messages, and
// answers the command's error when it cannot.
func (c *ctx) pushable() bool {
	if c.conn == nil || c.conn.pusher == nil {
		c.o.err(upper(c.cmd.fullname) + " needs a connection that can receive messages: psp's pub/sub runs over TCP")
		return false
	}
	return true
}

// upper is s in upper case (ASCII).
func upper(s string) string {
	b := []byte(s)
	for i, x := range b {
		if x >= 'a' && x <= 'z' {
			b[i] = x - ('a' - 'A')
		}
	}
	return string(b)
}

func cmdSubscribe(c *ctx) {
	if !c.pushable() {
		return
	}
	r, cn := &c.s.pubsub, c.conn
	r.mu.Lock()
	defer r.mu.Unlock()
	gone := cn.closed.Load() || cn.peerClosed.Load() // registered now, it would never leave
	for _, ch := range c.argv[1:] {
		if _, ok := cn.subChannels[string(ch)]; !ok && !gone {
			if cn.subChannels == nil {
				cn.subChannels = make(map[string]struct{})
			}
			name := string(ch)
			cn.subChannels[name] = struct{}{}
			if r.channels == nil {
				r.channels = make(map[string][]*Conn)
			}
			r.channels[name] = append(r.channels[name], cn)
		}
		c.o.notify(kindSubscribe, ch, cn.subscriptions())
	}
	cn.subs.Store(cn.subscriptions())
}

func cmdPsubscribe(c *ctx) {
	if !c.pushable() {
		return
	}
	r, cn := &c.s.pubsub, c.conn
	r.mu.Lock()
	defer r.mu.Unlock()
	gone := cn.closed.Load() || cn.peerClosed.Load()
	for _, p := range c.argv[1:] {
		if !slices.Contains(cn.subPatterns, string(p)) && !gone {
			name := string(p)
			cn.subPatterns = append(cn.subPatterns, name)
			if r.patterns == nil {
				r.patterns = make(map[string]*patternSubs)
			}
			ps := r.patterns[name]
			if ps == nil {
				pat := []byte(name)
				ps = &patternSubs{pat: pat, g: compileGlob(pat)}
				r.patterns[name] = ps
				r.pats = append(r.pats, ps)
			}
			ps.conns = append(ps.conns, cn)
		}
		c.o.notify(kindPSubscribe, p, cn.subscriptions())
	}
	cn.subs.Store(cn.subscriptions())
}

func cmdUnsubscribe(c *ctx) {
	r, cn := &c.s.pubsub, c.conn
	if cn == nil {
		c.o.notify(kindUnsubscribe, nil, 0)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(c.argv) == 1 {
		r.unsubscribeChannels(cn, c.o)
	} else {
		for _, ch := range c.argv[1:] {
			r.unsubscribeChannel(cn, string(ch))
			c.o.notify(kindUnsubscribe, ch, cn.subscriptions())
		}
	}
	cn.subs.Store(cn.subscriptions())
}

func cmdPunsubscribe(c *ctx) {
	r, cn := &c.s.pubsub, c.conn
	if cn == nil {
		c.o.notify(kindPUnsubscribe, nil, 0)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(c.argv) == 1 {
		r.unsubscribePatterns(cn, c.o)
	} else {
		for _, p := range c.argv[1:] {
			r.unsubscribePattern(cn, string(p))
			c.o.notify(kindPUnsubscribe, p, cn.subscriptions())
		}
	}
	cn.subs.Store(cn.subscriptions())
}

// unsubscribeChannel removes cn from channel, if it listens to it; mu
// held.
func (r *pubsubRegistry) unsubscribeChannel(cn *Conn, channel string) {
	if _, ok := cn.subChannels[channel]; !ok {
		return
	}
	delete(cn.subChannels, channel)
	subs := r.channels[channel]
	if i := slices.Index(subs, cn); i >= 0 {
		subs = slices.Delete(subs, i, i+1)
	}
	if len(subs) == 0 {
		delete(r.channels, channel)
	} else {
		r.channels[channel] = subs
	}
}

// unsubscribePattern removes cn from pattern, if it listens to it; mu
// held.
func (r *pubsubRegistry) unsubscribePattern(cn *Conn, pattern string) {
	i := slices.Index(cn.subPatterns, pattern)
	if i < 0 {
		return
	}
	cn.subPatterns = slices.Delete(cn.subPatterns, i, i+1)
	ps := r.patterns[pattern]
	if j := slices.Index(ps.conns, cn); j >= 0 {
		ps.conns = slices.Delete(ps.conns, j, j+1)
	}
	if len(ps.conns) == 0 {
		delete(r.patterns, pattern)
		r.pats = slices.DeleteFunc(r.pats, func(p *patternSubs) bool { return p == ps })
	}
}

// unsubscribeChannels removes cn from every channel, in byte order, with
// a notice each on o (nil: none), or one notice of no channel when it
// listened to none; mu held.
func (r *pubsubRegistry) unsubscribeChannels(cn *Conn, o *out) {
	if len(cn.subChannels) == 0 {
		if o != nil {
			o.notify(kindUnsubscribe, nil, cn.subscriptions())
		}
		return
	}
	names := make([]string, 0, len(cn.subChannels))
	for ch := range cn.subChannels {
		names = append(names, ch)
	}
	slices.Sort(names)
	for _, ch := range names {
		r.unsubscribeChannel(cn, ch)
		if o != nil {
			o.notify(kindUnsubscribe, []byte(ch), cn.subscriptions())
		}
	}
}

// unsubscribePatterns removes cn from every pattern, in the order it
// subscribed to them (redis-server's), with a notice each on o (nil:
// none), or one notice of no pattern when it listened to none; mu held.
func (r *pubsubRegistry) unsubscribePatterns(cn *Conn, o *out) {
	if len(cn.subPatterns) == 0 {
		if o != nil {
			o.notify(kindPUnsubscribe, nil, cn.subscriptions())
		}
		return
	}
	for len(cn.subPatterns) > 0 {
		p := cn.subPatterns[0]
		r.unsubscribePattern(cn, p)
		if o != nil {
			o.notify(kindPUnsubscribe, []byte(p), cn.subscriptions())
		}
	}
}

// leave removes cn from every channel and pattern, without a notice (its
// connection closed, or RESET).
func (r *pubsubRegistry) leave(cn *Conn) {
	if cn.subs.Load() == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unsubscribeChannels(cn, nil)
	r.unsubscribePatterns(cn, nil)
	cn.subs.Store(0)
}

// pubsubMessage appends a message of kind ("message" or "pmessage") to
// dst: the pattern that matched (pmessage only), the channel and the
// message, an array in RESP2 and a push in RESP3.
func pubsubMessage(dst []byte, resp3 bool, pattern, channel, msg []byte) []byte {
	n := byte('3')
	if pattern != nil {
		n = '4'
	}
	if resp3 {
		dst = append(dst, '>', n, '\r', '\n')
	} else {
		dst = append(dst, '*', n, '\r', '\n')
	}
	if pattern != nil {
		dst = append(dst, "$8\r\npmessage\r\n"...)
		dst = resp.AppendBulk(dst, pattern)
	} else {
		dst = append(dst, "$7\r\nmessage\r\n"...)
	}
	dst = resp.AppendBulk(dst, channel)
	return resp.AppendBulk(dst, msg)
}

// publish sends msg to the connections listening to channel, directly or
// through a pattern, and returns how many it sent it to (a connection
// once per pattern that matched, as redis-server counts). The message is
// formatted once per protocol and pattern, into the worker's buffers.
func (c *ctx) publish(channel, msg []byte) int64 {
	r := &c.s.pubsub
	bufs := &c.w.pubBufs
	r.mu.RLock()
	defer r.mu.RUnlock()
	n := int64(0)
	deliver := func(to []*Conn, pattern []byte) {
		bufs[0], bufs[1] = bufs[0][:0], bufs[1][:0]
		for _, cn := range to {
			n++
			p := 0
			if cn.resp3.Load() {
				p = 1
			}
			if len(bufs[p]) == 0 {
				bufs[p] = pubsubMessage(bufs[p], p == 1, pattern, channel, msg)
			}
			if cn == c.conn {
				c.o.write(bufs[p]) // before PUBLISH's own reply, as redis-server writes it
				continue
			}
			_ = cn.pusher.Push(bufs[p]) // refused: the connection is closed or closing (it leaves at ConnClosed)
		}
	}
	if subs := r.channels[string(channel)]; len(subs) > 0 {
		deliver(subs, nil)
	}
	for _, ps := range r.pats {
		if ps.g.match(channel) {
			deliver(ps.conns, ps.pat)
		}
	}
	for i := range bufs {
		if cap(bufs[i]) > 64<<10 {
			bufs[i] = nil
		}
	}
	return n
}

func cmdPublish(c *ctx) {
	c.o.integer(c.publish(c.argv[1], c.argv[2]))
}

func cmdPubsubChannels(c *ctx) {
	if len(c.argv) > 3 {
		c.o.errBytes(subcommandSyntaxError(c.argv))
		return
	}
	var g *glob
	if len(c.argv) == 3 {
		gl := compileGlob(c.argv[2])
		g = &gl
	}
	r := &c.s.pubsub
	r.mu.RLock()
	names := make([]string, 0, len(r.channels))
	for ch := range r.channels {
		if g == nil || g.match([]byte(ch)) {
			names = append(names, ch)
		}
	}
	r.mu.RUnlock()
	slices.Sort(names)
	c.o.arrayLen(len(names))
	for _, ch := range names {
		c.o.bulkString(ch)
	}
}

func cmdPubsubNumsub(c *ctx) {
	r := &c.s.pubsub
	r.mu.RLock()
	defer r.mu.RUnlock()
	c.o.arrayLen(2 * (len(c.argv) - 2))
	for _, ch := range c.argv[2:] {
		c.o.bulk(ch)
		c.o.integer(int64(len(r.channels[string(ch)])))
	}
}

func cmdPubsubNumpat(c *ctx) {
	r := &c.s.pubsub
	r.mu.RLock()
	defer r.mu.RUnlock()
	c.o.integer(int64(len(r.patterns)))
}

// cmdPubsubShardchannels: psp has no shard channels (SSUBSCRIBE is not
// one of its commands).
func cmdPubsubShardchannels(c *ctx) {
	if len(c.argv) > 3 {
		c.o.errBytes(subcommandSyntaxError(c.argv))
		return
	}
	c.o.arrayLen(0)
}

func cmdPubsubShardnumsub(c *ctx) {
	c.o.arrayLen(2 * (len(c.argv) - 2))
	for _, ch := range c.argv[2:] {
		c.o.bulk(ch)
		c.o.integer(0)
	}
}

func cmdPubsubHelp(c *ctx) {
	writeHelp(c, []string{
		"PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"CHANNELS [<pattern>]",
		"    Return the currently active channels matching a <pattern> (default: '*').",
		"NUMPAT",
		"    Return number of subscriptions to patterns.",
		"NUMSUB [<channel> ...]",
		"    Return the number of subscribers for the specified channels, excluding",
		"    pattern subscriptions(default: no channels).",
		"SHARDCHANNELS [<pattern>]",
		"    Return the currently active shard level channels matching a <pattern> (default: '*').",
		"SHARDNUMSUB [<shardchannel> ...]",
		"    Return the number of subscribers for the specified shard level channel(s)",
		"HELP",
		"    Prints this help.",
	})
}

// subscribedOnly reports whether cmd is refused because the connection is
// subscribed and speaks RESP2, and answers redis-server's error then.
func (c *ctx) subscribedOnly(cmd *command) bool {
	if c.conn == nil || c.o.resp3 || c.conn.subs.Load() == 0 {
		return false
	}
	switch cmd.fullname {
	case "ping", "subscribe", "unsubscribe", "psubscribe", "punsubscribe", "quit", "reset":
		return false
	}
	c.reject(cmd, "Can't execute '"+cmd.fullname+"': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context")
	return true
}
