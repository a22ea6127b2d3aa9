package redis

// WATCH, as redis-server 7.0's multi.c: a connection watches keys, and
// its next EXEC answers the null array and runs nothing when one of them
// was modified since (by any client, itself included) or has expired.
//
// A watched key is listed under its shard (shard.watched: key -> the
// connections watching it, redis-server's db->watched_keys), guarded by
// the shard's lock, which every command that writes the key already
// holds for writing: a write signals the key (shard.modified, where
// redis-server calls signalModifiedKey) at the cost of reading the
// shard's watched map's length when nobody watches a key of that shard.
// A signalled key marks its watchers' connections dirty (Conn.casDirty,
// redis-server's CLIENT_DIRTY_CAS). FLUSHDB and FLUSHALL mark those
// whose key existed (store.flush, touchAllWatchedKeysInDb), and a key
// deleted on expiry is signalled as redis-server's
// deleteExpiredKeyAndPropagate does.
//
// A key watched while it was there but already expired is flagged
// (redis-server's watchedKey.expired): its deletion is no change, and it
// does not fail EXEC by being expired.
//
// EXEC checks the flag once every other worker is held between two
// requests (holdWorkers): a write that ran before is seen, and none runs
// between the check and the transaction. It then forgets the watches,
// as DISCARD, UNWATCH, RESET and the connection's end do.

// watch is one connection watching one key (redis-server's watchedKey).
type watch struct {
	cn  *Conn
	sh  *shard // the key's
	key string
	// expired: the key was there and expired when watched; cleared
	// when it is deleted (under the shard's lock).
	expired bool
}

// modified signals that the caller, holding sh for writing, changed key
// (redis-server's signalModifiedKey): the connections watching it will
// fail their EXEC.
func (sh *shard) modified(key []byte) {
	if len(sh.watched) != 0 {
		sh.touchWatched(key)
	}
}

// touchWatched is redis-server's touchWatchedKey.
func (sh *shard) touchWatched(key []byte) {
	for _, w := range sh.watched[string(key)] {
		if w.cn.casDirty.Load() {
			// redis-server forgets a dirty connection's watches at
			// once; psp keeps them until EXEC, DISCARD, UNWATCH or
			// RESET, and passes them by.
			continue
		}
		if w.expired {
			if sh.m[string(key)] == nil {
				// The expired key was deleted: no logical change.
				w.expired = false
				continue
			}
			break // as redis-server 7.0.15, which stops here
		}
		w.cn.casDirty.Store(true)
	}
}

// flushWatched marks dirty the connections watching a key of sh that
// exists, before FLUSHDB or FLUSHALL empties it (the caller holds sh for
// writing): redis-server's touchAllWatchedKeysInDb.
func (sh *shard) flushWatched() {
	for key, ws := range sh.watched {
		if sh.m[key] == nil {
			continue
		}
		for _, w := range ws {
			switch {
			case w.cn.casDirty.Load():
			case w.expired:
				w.expired = false
			default:
				w.cn.casDirty.Store(true)
			}
		}
	}
}

// expire deletes e, which the caller holding sh for writing found
// expired, and signals its key, as redis-server's
// deleteExpiredKeyAndPropagate does.
func (s *store) expire(sh *shard, e *entry) {
	s.remove(sh, e)
	sh.modified(stringBytes(e.key))
}

// watchKeys adds keys to cn's watches (redis-server's watchForKey): a key
// it already watches is skipped.
func (s *Server) watchKeys(cn *Conn, keys [][]byte, clk *cmdClock) {
	cn.watchMu.Lock()
	defer cn.watchMu.Unlock()
next:
	for _, k := range keys {
		for _, w := range cn.watches {
			if w.key == string(k) {
				continue next
			}
		}
		sh, _ := s.db.shardOf(k)
		w := &watch{cn: cn, sh: sh, key: string(k)}
		sh.mu.Lock()
		if e := sh.m[w.key]; e != nil && !e.live(clk) {
			w.expired = true
		}
		if sh.watched == nil {
			sh.watched = make(map[string][]*watch)
		}
		sh.watched[w.key] = append(sh.watched[w.key], w)
		sh.mu.Unlock()
		cn.watches = append(cn.watches, w)
	}
	if cn.closed.Load() {
		// The connection closed while WATCH ran: its ConnClosed may
		// have unwatched before these were added.
		cn.unwatchLocked()
	}
}

// unwatch forgets cn's watches and clears its dirty flag (redis-server's
// unwatchAllKeys and the CLIENT_DIRTY_CAS reset that goes with it).
func (cn *Conn) unwatch() {
	cn.watchMu.Lock()
	cn.unwatchLocked()
	cn.watchMu.Unlock()
}

func (cn *Conn) unwatchLocked() {
	for _, w := range cn.watches {
		sh := w.sh
		sh.mu.Lock()
		ws := sh.watched[w.key]
		for i, o := range ws {
			if o == w {
				ws = append(ws[:i], ws[i+1:]...)
				break
			}
		}
		if len(ws) == 0 {
			delete(sh.watched, w.key)
			if len(sh.watched) == 0 {
				sh.watched = nil
			}
		} else {
			sh.watched[w.key] = ws
		}
		sh.mu.Unlock()
	}
	clear(cn.watches)
	cn.watches = cn.watches[:0]
	cn.casDirty.Store(false)
}

// watchFailed reports whether EXEC must run nothing: a watched key was
// modified, or has expired since it was watched (redis-server's
// CLIENT_DIRTY_CAS and isWatchedKeyExpired).
func (cn *Conn) watchFailed(clk *cmdClock) bool {
	if cn.casDirty.Load() {
		return true
	}
	cn.watchMu.Lock()
	defer cn.watchMu.Unlock()
	for _, w := range cn.watches {
		sh := w.sh
		sh.mu.RLock()
		e := sh.m[w.key]
		expired := !w.expired && e != nil && !e.live(clk)
		sh.mu.RUnlock()
		if expired {
			return true
		}
	}
	return false
}

func cmdWatch(c *ctx) {
	if c.conn == nil {
		c.o.err("WATCH needs a connection: a datagram is one command")
		return
	}
	if on, _ := c.conn.transaction(); on {
		c.o.err("WATCH inside MULTI is not allowed")
		return
	}
	// Watching more is pointless once a watched key was modified.
	if !c.conn.casDirty.Load() {
		c.s.watchKeys(c.conn, c.argv[1:], &c.clk)
	}
	c.o.ok()
}

func cmdUnwatch(c *ctx) {
	if c.conn != nil {
		c.conn.unwatch()
	}
	c.o.ok()
}
