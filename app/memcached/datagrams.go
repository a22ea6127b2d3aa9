package memcached

// sender takes a reply's datagrams but the last (a app.Reply).
type sender interface {
	Send(p []byte) error
}

// datagrams frames one request's response objects into UDP datagrams.
// Every datagram but the last goes to the sender as soon as the next one
// exists; the last stays in held, for the request's own buffer.
//
// A request may cause at most limit bytes (datagrams and their headers) to
// be sent: a response object that would go past limit less the room of
// the cut line is not sent, nor anything after it, and the reply ends with
// msgUDPCut instead (see cutLine).
type datagrams struct {
	id    uint16
	held  [UDPMaxPayload]byte
	n     int // bytes in held; 0: nothing held
	to    sender
	sent  int // datagrams produced, held one included
	lost  int // datagrams the sender refused (no buffer)
	extra int // datagrams handed to the sender
	limit int // bytes this request may cause to be sent; 0: unbounded
	bytes int // bytes produced, headers included
	cut   bool
}

// cutRoom is the room the cut line's datagram takes.
var cutRoom = UDPHeaderLen + len(msgUDPCut) + len(crlf)

func (d *datagrams) reset(id uint16, to sender) {
	d.id, d.n, d.to, d.sent, d.lost, d.extra = id, 0, to, 0, 0, 0
	d.limit, d.bytes, d.cut = 0, 0, false
}

// fits reports whether a response object of n bytes may still be sent;
// when it may not, the reply is cut.
func (d *datagrams) fits(n int) bool {
	if d.cut {
		return false
	}
	if d.limit > 0 {
		dgs := max(1, (n+udpDataSize-1)/udpDataSize)
		if d.bytes+n+dgs*UDPHeaderLen > d.limit-cutRoom {
			d.cut = true
			return false
		}
	}
	return true
}

// cutLine ends a cut reply with its error line, in a message of its own.
func (d *datagrams) cutLine() {
	var line [64]byte
	d.datagram(0, 1, append(append(line[:0], msgUDPCut...), crlf...))
}

// message sends one response object: as many datagrams of up to
// udpDataSize bytes as it takes, numbered from 0 with their total, or one
// header-only datagram with a total of 0 when it is empty.
func (d *datagrams) message(p []byte) {
	if !d.fits(len(p)) {
		return
	}
	if len(p) == 0 {
		d.datagram(0, 0, nil)
		return
	}
	total := min((len(p)+udpDataSize-1)/udpDataSize, 0xffff)
	for seq := 0; len(p) > 0; seq++ {
		k := min(len(p), udpDataSize)
		d.datagram(uint16(seq), uint16(total), p[:k])
		p = p[k:]
	}
}

func (d *datagrams) datagram(seq, total uint16, chunk []byte) {
	if d.n > 0 {
		d.push()
	}
	FrameHeader{RequestID: d.id, Seq: seq, Total: total}.Put(d.held[:])
	d.n = UDPHeaderLen + copy(d.held[UDPHeaderLen:], chunk)
	d.bytes += d.n
	d.sent++
}

// push hands the held datagram to the sender.
func (d *datagrams) push() {
	if d.to == nil || d.to.Send(d.held[:d.n]) != nil {
		d.lost++
	} else {
		d.extra++
	}
	d.n = 0
}
