package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Admin bodies. A change's body (a module, a tenant, an update) is read
// only after its token is checked, under its endpoint's size limit and two
// bounds shared by every endpoint: the bytes of all bodies being read or
// held at once (a body reserves its declared length, or its endpoint's
// limit when it declares none, before a byte is read, and is read into a
// buffer of that size, never grown), and the uploads in flight per
// credential. Past the first a body is refused with 503, past the second
// with 429; a body that stops arriving for adminBodyStall, or is not all
// there within adminReadTimeout, is cut with 408.
// Each refusal is counted (psp_admin_bodies_refused_total).
const (
	// adminBodyBudget bounds the bytes of the bodies read or held at
	// once: eight of the largest modules.
	adminBodyBudget = 8 * maxClassifierUpload
	// adminUploadsPerCredential bounds one credential's bodies in flight.
	adminUploadsPerCredential = 2
	// adminBodyStall is the longest a body may pause.
	adminBodyStall = 5 * time.Second
)

// Why a body was refused.
const (
	bodyTooLarge   = "too_large" // past its endpoint's limit
	bodyOverBudget = "budget"    // past the bytes of all bodies at once
	bodyInFlight   = "in_flight" // past the credential's uploads in flight
	bodyStalled    = "stalled"   // stopped arriving
)

// bodyReasons are the refusal reasons, as metrics label them.
var bodyReasons = [...]string{bodyTooLarge, bodyOverBudget, bodyInFlight, bodyStalled}

// bodyLimits holds the admin bodies' bounds. Safe for concurrent use.
type bodyLimits struct {
	mu       sync.Mutex
	bytes    int64          // reserved by bodies in flight
	max      int64          // the most reserved at once
	inFlight map[string]int // bodies in flight per credential
	perCred  int
	stall    time.Duration
	refused  [len(bodyReasons)]atomic.Uint64
}

func newBodyLimits(max int64, perCredential int, stall time.Duration) *bodyLimits {
	return &bodyLimits{max: max, perCred: perCredential, stall: stall, inFlight: map[string]int{}}
}

// reserved returns the bytes the bodies in flight hold.
func (b *bodyLimits) reserved() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bytes
}

// refusedCount returns how many bodies were refused for reason i of
// bodyReasons.
func (b *bodyLimits) refusedCount(i int) uint64 { return b.refused[i].Load() }

func (b *bodyLimits) refuse(reason string) {
	for i, r := range bodyReasons {
		if r == reason {
			b.refused[i].Add(1)
		}
	}
}

// bodyError is a body refused: its HTTP status, reason and message.
type bodyError struct {
	code   int
	reason string
	msg    string
}

func (e *bodyError) Error() string { return e.msg }

// acquire reserves n bytes for one body of credential cred, or says why
// not. release gives them back (once).
func (b *bodyLimits) acquire(cred string, n int64) (release func(), err *bodyError) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inFlight[cred] >= b.perCred {
		b.refuse(bodyInFlight)
		return nil, &bodyError{http.StatusTooManyRequests, bodyInFlight,
			fmt.Sprintf("this token has %d uploads in progress already, the most at once: retry when one ends", b.perCred)}
	}
	if b.bytes+n > b.max {
		b.refuse(bodyOverBudget)
		return nil, &bodyError{http.StatusServiceUnavailable, bodyOverBudget,
			fmt.Sprintf("the server is reading %d bytes of uploads, and this one's %d would pass its %d-byte budget: retry shortly", b.bytes, n, b.max)}
	}
	b.bytes += n
	b.inFlight[cred]++
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.bytes -= n
			if b.inFlight[cred]--; b.inFlight[cred] <= 0 {
				delete(b.inFlight, cred)
			}
		})
	}, nil
}

// refuseBody ends a request whose body is left unread: its connection
// closes after the answer, which net/http would otherwise hold back
// while it drains a body of unknown length (a stalled one until the
// read deadline).
func refuseBody(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
}

// readBody reads r's body of at most limit bytes for credential p under
// the budget. The caller must call release once done with the body, also
// after an error (it is then a no-op). On error the answer is the
// bodyError's status (the connection then closes after it); what is
// refused is counted.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, p principal, limit int64) (body []byte, release func(), err *bodyError) {
	release = func() {}
	defer func() {
		if err != nil {
			refuseBody(w, r)
		}
	}()
	n := limit
	if cl := r.ContentLength; cl > limit {
		s.bodies.refuse(bodyTooLarge)
		return nil, release, &bodyError{http.StatusRequestEntityTooLarge, bodyTooLarge,
			fmt.Sprintf("body of %d bytes larger than the %d-byte limit", cl, limit)}
	} else if cl >= 0 {
		n = cl
	}
	rel, berr := s.bodies.acquire(p.String(), n)
	if berr != nil {
		if berr.code == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		return nil, release, berr
	}
	release = rel
	// One byte more than a body without a length may have, to tell one
	// at the limit from one past it.
	buf := make([]byte, 0, min(n+1, limit+1))
	rc := http.NewResponseController(w)
	end := time.Now().Add(adminReadTimeout)
	for {
		// A deadline per read: a body may take its time as long as it
		// keeps arriving, up to adminReadTimeout in all. (A recorder in
		// tests has no deadlines.)
		deadline := time.Now().Add(s.bodies.stall)
		if deadline.After(end) {
			deadline = end
		}
		_ = rc.SetReadDeadline(deadline)
		if len(buf) == cap(buf) {
			break
		}
		m, rerr := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if rerr == nil {
			continue
		}
		if errors.Is(rerr, os.ErrDeadlineExceeded) {
			s.bodies.refuse(bodyStalled)
			return nil, release, &bodyError{http.StatusRequestTimeout, bodyStalled,
				fmt.Sprintf("body stopped arriving: nothing for %v, or not all within %v, after %d bytes", s.bodies.stall, adminReadTimeout, len(buf))}
		}
		if rerr == io.EOF {
			break
		}
		return nil, release, &bodyError{http.StatusBadRequest, "", fmt.Sprintf("read body: %v", rerr)}
	}
	_ = rc.SetReadDeadline(time.Time{})
	if int64(len(buf)) > limit {
		s.bodies.refuse(bodyTooLarge)
		return nil, release, &bodyError{http.StatusRequestEntityTooLarge, bodyTooLarge,
			fmt.Sprintf("body larger than the %d-byte limit", limit)}
	}
	if r.ContentLength >= 0 && int64(len(buf)) < r.ContentLength {
		return nil, release, &bodyError{http.StatusBadRequest, "", fmt.Sprintf("read body: %d of %d bytes", len(buf), r.ContentLength)}
	}
	return buf, release, nil
}
