package sim

// Connections (Config.Conns): each request goes on the connection a
// connpick.Picker chooses, as the load generator sends it (or on the one a
// trace says), and a connection's replies leave in the order of its
// requests, as a stream dataplane sends them. A request done before an
// earlier one of its connection keeps its handle until its turn comes;
// each connection links its requests not yet answered through
// request.nextOnConn, so the model allocates nothing per request.

// outcome is how a request ended.
type outcome uint8

const (
	outcomePending outcome = iota // not done yet
	outcomeServed
	outcomeDropped // refused on arrival (queue full, no budget)
	outcomeExpired // waited past its deadline
)

// connTurns is one connection's requests not yet answered, oldest first,
// and when its last turn passed.
type connTurns struct {
	head, tail int32 // request handles; -1: none
	last       int64
}

func newConnTurns(n int) []connTurns {
	cs := make([]connTurns, n)
	for i := range cs {
		cs[i].head, cs[i].tail = -1, -1
	}
	return cs
}

// onConn appends request h, just arrived, to connection c's turns.
func (r *run) onConn(h, c int32) {
	q := &r.reqs[h]
	q.conn, q.nextOnConn, q.outcome = c, -1, outcomePending
	ct := &r.conns[c]
	if ct.tail >= 0 {
		r.reqs[ct.tail].nextOnConn = h
	} else {
		ct.head = h
	}
	ct.tail = h
}

// answerInOrder answers connection c's requests that are done, oldest
// first, up to the first one that is not: each reply leaves at the later
// of its request's end and the previous turn of the connection. A drop
// sends nothing but takes its turn when it is dropped, as a stream
// dataplane releases the request's place then.
func (r *run) answerInOrder(c int32) {
	ct := &r.conns[c]
	for ct.head >= 0 {
		h := ct.head
		q := &r.reqs[h]
		if q.outcome == outcomePending {
			return
		}
		ct.head = q.nextOnConn
		if ct.head < 0 {
			ct.tail = -1
		}
		ct.last = max(ct.last, q.doneAt)
		if r.picker != nil {
			r.picker.Done(int(c))
		}
		r.answer(h, ct.last, q.outcome)
	}
}
