package redis

import "math/rand/v2"

// zsetObj is a sorted set: a skip list ordered by (score, member), with
// spans for ranks, and each member's score by name (redis-server's
// zskiplist and dict).
type zsetObj struct {
	scores map[string]float64
	zsl    skiplist
	// big: redis-server would hold the set as a skip list, not a
	// listpack: it has had more than zsetSmallEntries members, or one longer
	// than smallValue bytes (it never goes back). A listpack stores a
	// score that is an integer as one, so that -0 reads back as 0.
	big bool
}

func newZSetObj() *zsetObj {
	z := &zsetObj{scores: make(map[string]float64)}
	z.zsl.init()
	return z
}

func (z *zsetObj) card() int { return int(z.zsl.length) }

const (
	zslMaxLevel  = 32
	zslThreshold = 0xFFFF / 4 // ZSKIPLIST_P = 0.25
)

type zslNode struct {
	member   string
	score    float64
	backward *zslNode
	level    []zslLevel
}

type zslLevel struct {
	forward *zslNode
	span    uint64
}

type skiplist struct {
	header *zslNode
	tail   *zslNode
	length uint64
	level  int
}

func (zsl *skiplist) init() {
	zsl.header = &zslNode{level: make([]zslLevel, zslMaxLevel)}
	zsl.level = 1
}

func randomLevel() int {
	level := 1
	for level < zslMaxLevel && rand.Uint32()&0xFFFF < zslThreshold {
		level++
	}
	return level
}

// less reports whether (score, member) sorts before node x.
func before(x *zslNode, score float64, member string) bool {
	return x.score < score || (x.score == score && x.member < member)
}

// insert adds a member that is not in the list.
func (zsl *skiplist) insert(score float64, member string) *zslNode {
	var update [zslMaxLevel]*zslNode
	var rank [zslMaxLevel]uint64
	x := zsl.header
	for i := zsl.level - 1; i >= 0; i-- {
		if i != zsl.level-1 {
			rank[i] = rank[i+1]
		}
		for x.level[i].forward != nil && before(x.level[i].forward, score, member) {
			rank[i] += x.level[i].span
			x = x.level[i].forward
		}
		update[i] = x
	}
	level := randomLevel()
	if level > zsl.level {
		for i := zsl.level; i < level; i++ {
			rank[i] = 0
			update[i] = zsl.header
			update[i].level[i].span = zsl.length
		}
		zsl.level = level
	}
	x = &zslNode{member: member, score: score, level: make([]zslLevel, level)}
	for i := 0; i < level; i++ {
		x.level[i].forward = update[i].level[i].forward
		update[i].level[i].forward = x
		x.level[i].span = update[i].level[i].span - (rank[0] - rank[i])
		update[i].level[i].span = (rank[0] - rank[i]) + 1
	}
	for i := level; i < zsl.level; i++ {
		update[i].level[i].span++
	}
	if update[0] != zsl.header {
		x.backward = update[0]
	}
	if x.level[0].forward != nil {
		x.level[0].forward.backward = x
	} else {
		zsl.tail = x
	}
	zsl.length++
	return x
}

func (zsl *skiplist) deleteNode(x *zslNode, update *[zslMaxLevel]*zslNode) {
	for i := 0; i < zsl.level; i++ {
		if update[i].level[i].forward == x {
			update[i].level[i].span += x.level[i].span - 1
			update[i].level[i].forward = x.level[i].forward
		} else {
			update[i].level[i].span--
		}
	}
	if x.level[0].forward != nil {
		x.level[0].forward.backward = x.backward
	} else {
		zsl.tail = x.backward
	}
	for zsl.level > 1 && zsl.header.level[zsl.level-1].forward == nil {
		zsl.level--
	}
	zsl.length--
}

// delete removes (score, member) and reports whether it was there.
func (zsl *skiplist) delete(score float64, member string) bool {
	var update [zslMaxLevel]*zslNode
	x := zsl.header
	for i := zsl.level - 1; i >= 0; i-- {
		for x.level[i].forward != nil && before(x.level[i].forward, score, member) {
			x = x.level[i].forward
		}
		update[i] = x
	}
	x = x.level[0].forward
	if x != nil && x.score == score && x.member == member {
		zsl.deleteNode(x, &update)
		return true
	}
	return false
}

// rank returns the 1-based rank of (score, member), 0 when absent.
func (zsl *skiplist) rank(score float64, member string) uint64 {
	var rank uint64
	x := zsl.header
	for i := zsl.level - 1; i >= 0; i-- {
		for x.level[i].forward != nil && (before(x.level[i].forward, score, member) ||
			(x.level[i].forward.score == score && x.level[i].forward.member == member)) {
			rank += x.level[i].span
			x = x.level[i].forward
		}
		if x != zsl.header && x.member == member {
			return rank
		}
	}
	return 0
}

// byRank returns the node of 1-based rank r.
func (zsl *skiplist) byRank(r uint64) *zslNode {
	var traversed uint64
	x := zsl.header
	for i := zsl.level - 1; i >= 0; i-- {
		for x.level[i].forward != nil && traversed+x.level[i].span <= r {
			traversed += x.level[i].span
			x = x.level[i].forward
		}
		if traversed == r {
			return x
		}
	}
	return nil
}

// scoreRange is a score interval, each end open or closed.
type scoreRange struct {
	min, max     float64
	minex, maxex bool
}

func (r *scoreRange) gteMin(v float64) bool {
	if r.minex {
		return v > r.min
	}
	return v >= r.min
}

func (r *scoreRange) lteMax(v float64) bool {
	if r.maxex {
		return v < r.max
	}
	return v <= r.max
}

// empty reports whether no score can be in r.
func (r *scoreRange) empty() bool {
	return r.min > r.max || (r.min == r.max && (r.minex || r.maxex))
}

// firstIn returns the first node in r, or nil.
func (zsl *skiplist) firstIn(r *scoreRange) *zslNode {
	if r.empty() {
		return nil
	}
	x := zsl.header
	for i := zsl.level - 1; i >= 0; i-- {
		for x.level[i].forward != nil && !r.gteMin(x.level[i].forward.score) {
			x = x.level[i].forward
		}
	}
	x = x.level[0].forward
	if x == nil || !r.lteMax(x.score) {
		return nil
	}
	return x
}

// lastIn returns the last node in r, or nil.
func (zsl *skiplist) lastIn(r *scoreRange) *zslNode {
	if r.empty() {
		return nil
	}
	x := zsl.header
	for i := zsl.level - 1; i >= 0; i-- {
		for x.level[i].forward != nil && r.lteMax(x.level[i].forward.score) {
			x = x.level[i].forward
		}
	}
	if x == zsl.header || !r.gteMin(x.score) {
		return nil
	}
	return x
}

// add sets member's score, and reports whether the member is new.
func (z *zsetObj) add(member string, score float64) bool {
	old, ok := z.scores[member]
	if !ok && !z.big && (z.card()+1 > zsetSmallEntries || len(member) > smallValue) {
		z.big = true // zsetAdd converts before it inserts
	}
	if score == 0 && !z.big {
		score = 0 // a listpack's integer 0 (zzlInsertAt's double2ll)
	}
	if ok {
		if old != score {
			z.zsl.delete(old, member)
			z.zsl.insert(score, member)
			z.scores[member] = score
		}
		return false
	}
	z.scores[member] = score
	z.zsl.insert(score, member)
	return true
}

// remove removes member and reports whether it was there.
func (z *zsetObj) remove(member string) bool {
	score, ok := z.scores[member]
	if !ok {
		return false
	}
	delete(z.scores, member)
	z.zsl.delete(score, member)
	return true
}

// clone returns a copy of z, a listpack's or a skip list's as z is
// (COPY).
func (z *zsetObj) clone() *zsetObj {
	d := newZSetObj()
	d.big = z.big
	for x := z.zsl.header.level[0].forward; x != nil; x = x.level[0].forward {
		d.scores[x.member] = x.score
		d.zsl.insert(x.score, x.member)
	}
	return d
}
