package server

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/fenceworks/fence"
)

// Large replies are held in memory until they are written: a Read of a
// resource (its value copied out of the state, then encoded: base64 in
// JSON, maybe gzip) or a List page of up to 10,000 locks. A client that
// asks for many and reads none (its socket or its HTTP/2 window stays
// shut) would make the server hold them all until WriteTimeout cuts each,
// and ask again. So the bytes of such replies are reserved before they are
// kept, from two budgets:
//   - the connection's, maxConnReplyBytes: one client connection (every
//     stream and request on it) holds at most that much;
//   - the server's, Config.MaxReplyBytes: all connections together (and
//     the peer port) hold at most that much;
//   - with authentication on, the principal's (principalReplies): all
//     the requests of one principal, on every connection, hold at most
//     its share of the server's, max(maxConnReplyBytes, MaxReplyBytes/4)
//     and at most all of it, so that one principal that does not read
//     (on as many connections as it may open) leaves room for every
//     other's large reads (an outside attack: one tenant's unread Lists
//     on 17–100 connections made every other tenant's large List or Read
//     wait until WriteTimeout cut it). The principal is known once
//     authorize ran in the read (it records it in the request's hold);
//     its budget is looked up only for a large reply and removed once no
//     request of it holds or waits. Several principals that do not read
//     can still fill the server's budget together (four shares). With
//     authentication off every caller is the same anonymous one: no
//     share, as before.
//
// A reservation is held until the reply is written (a unary call: its
// handler returned; a session stream: the reply was sent) or the request
// ends. A reply that finds no room *waits* for it, bounded by its
// request's context (a unary call's deadline, the client going away, the
// stream ending), and while it waits it holds none of its bytes: the reply
// is dropped and the read made again once room is reserved (reads propose
// nothing; the second is as linearizable as the first). So that a
// connection's reads do not each make (and drop) a large reply first,
// a read reserves beforehand, in its connection's budget only, what the
// connection's last read reply cost (its guess: at first a 1 MiB value's,
// 0 once a reply was small), and waits there for room. (Not in the
// server's: a connection whose last reply was large would have its small
// reads wait on other clients' unread replies.)
//
// What is being built is bounded as well, server-wide: a reply is made
// (the List page or the value read out of the state, converted, then
// encoded) before its size is known, so before it reads, a read reserves
// what its reply may cost at most, from the server's build budget
// (Server.building, also Config.MaxReplyBytes): a Read the cost of its
// value's reply, the value's size read in the local replica just before
// (without copying it; 0 when small, so a small Read never waits here:
// with a flat 3 MiB a Read of 4 bytes took 3.7–4.7 s under an attack), a
// List its page size × listLockCost; at most the budget. It holds that only while it reads and converts: once its reply
// holds its own cost in the budgets above (or was dropped to wait for
// room) the build's bytes are given back. Without it the budgets above
// bounded what was held, not what was made: 200 connections that did not
// read, each pipelining Lists of 10,000 locks, each connection within its
// own 16 MiB, built 3.2 GB at once (an outside attack: a 2–3.4 GB heap
// while fence_http_reply_bytes_held stayed at its 256 MiB cap). So at
// most twice MaxReplyBytes of large replies are counted: what is held,
// and what is being built (a reply built and dropped for want of room is
// garbage besides, until collected: docs/benchmarks.md). A build waits only for other builds to end
// (they wait on no client: a build that finds no room in the budgets
// above drops its reply, gives its build bytes back and waits there), so
// a small Read waits at most for the reads being made, never for replies
// that are not read.
//
// Waiting rather than refusing: a client that reads its replies gets them
// all, its replies beyond the budget being built as earlier ones are
// written (on loopback, milliseconds); only a client that does not read
// waits, for room its own unread replies hold, until WriteTimeout frees
// it. Refusing (RESOURCE_EXHAUSTED) would fail an honest client's
// concurrent large reads for a limit it cannot see, and it would resend.
//
// Replies whose cost is under replySmall are not counted: they cost about
// what the request and its stream cost, bounded by the stream limits like
// any other call's, and so a client filling the server's budget delays
// only large reads, never an acquire, a renew or a small read.
const (
	// maxConnReplyBytes is the budget of one client connection.
	maxConnReplyBytes = 16 << 20
	// DefaultMaxReplyBytes is the default server-wide budget.
	DefaultMaxReplyBytes = 256 << 20
	// replySmall: a reply costing less is not counted.
	replySmall = 16 << 10
	// replyCostFactor: a reply of n proto bytes is reserved as this many
	// times n: the message (a Read's value is a copy), its encoding (JSON's
	// base64 is 4/3 of the value) and a compressed copy, measured
	// (TestUnreadRepliesOfOneConnectionAreBounded).
	replyCostFactor = 3
	// listLockCost: what one lock of a List page is reserved as in the
	// build budget before the page is read: a held List reply of 10,000
	// locks with 512-byte names and a 200-byte owner (one holder each)
	// grew the live heap 5.4 KiB a lock. A lock with many holders (a
	// shared lock) costs more: its page is made over its reservation.
	// A page's cost once read is its proto size × replyCostFactor and
	// listLockHeap a lock.
	listLockCost = 6 << 10
	// listLockHeap: what one lock of a List reply holds besides its
	// proto size × replyCostFactor: its Go values (the LockInfo and Lease
	// messages, their durations).
	listLockHeap = 512
)

// replyBudget is a budget of reply bytes: reservations wait for room.
type replyBudget struct {
	max int64

	mu    sync.Mutex
	used  int64
	freed chan struct{} // closed (and replaced) when bytes are given back
	// guess (a connection's budget only): what the connection's next read
	// reply is taken to cost, reserved before it reads: the cost of its
	// last one (0: small, nothing reserved), at first a large value's.
	guess int64
	// holds: requests holding bytes now; waiting: requests waiting for
	// room (both counted in the server's budget only).
	holds, waiting int64
}

func newReplyBudget(max, guess int64) *replyBudget {
	return &replyBudget{max: max, guess: min(guess, max), freed: make(chan struct{})}
}

// firstGuess is a connection's guess before its first read reply: the
// cost of a reply of the largest value.
const firstGuess = replyCostFactor * fence.MaxValueBytes

// try takes n bytes if they fit now.
func (b *replyBudget) try(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max {
		return false
	}
	b.used += n
	return true
}

// take takes n bytes, waiting for room until ctx ends.
func (b *replyBudget) take(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if b.used+n <= b.max {
			b.used += n
			b.mu.Unlock()
			return nil
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// takeGuess takes the guess (waiting for room until ctx ends, or until
// the guess is 0) and returns what it took.
func (b *replyBudget) takeGuess(ctx context.Context) (int64, error) {
	for {
		b.mu.Lock()
		g := b.guess
		if g == 0 || b.used+g <= b.max {
			b.used += g
			b.mu.Unlock()
			return g, nil
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// tryGuess takes the guess if it fits now (or is 0).
func (b *replyBudget) tryGuess() (int64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.guess
	if g == 0 || b.used+g <= b.max {
		b.used += g
		return g, true
	}
	return 0, false
}

// setGuess makes n the guess; requests waiting to take the guess look
// again.
func (b *replyBudget) setGuess(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n = min(n, b.max)
	if b.guess != n {
		b.guess = n
		b.wake()
	}
}

// give gives back n bytes.
func (b *replyBudget) give(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.wake()
	b.mu.Unlock()
}

// wake wakes every request waiting for room (under b.mu).
func (b *replyBudget) wake() {
	close(b.freed)
	b.freed = make(chan struct{})
}

// count adds to the requests holding bytes and those waiting.
func (b *replyBudget) count(holds, waiting int64) {
	b.mu.Lock()
	b.holds += holds
	b.waiting += waiting
	b.mu.Unlock()
}

// state is the bytes reserved, the requests holding them and the
// requests waiting for room.
func (b *replyBudget) state() (used, holds, waiting int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.holds, b.waiting
}

// replyHold is what one request (a unary call, or one request of a
// session stream) holds of the budgets of its connection (conn: nil on
// the peer port or with Handler mounted elsewhere) and of the server. It
// is used by one goroutine at a time (the request's, then the stream's
// sender).
type replyHold struct {
	conn, all         *replyBudget
	heldConn, heldAll int64
	// principals: the server's per-principal budgets (nil: none, the
	// hold made outside a Server). principal is the request's caller, set
	// by authorize when authentication is on (authed); prin its budget,
	// looked up once the request's reply is found large, held (with
	// heldPrin of it) until release.
	principals *principalReplies
	principal  string
	authed     bool
	prin       *principalBudget
	heldPrin   int64
	// build: the server's build budget (nil: none, Handler mounted
	// without holdReplies).
	build *replyBudget
}

type replyHoldKey struct{}

// newReplyHold is a hold on the budgets of the request of ctx.
func (s *Server) newReplyHold(ctx context.Context) *replyHold {
	return &replyHold{all: s.replies, conn: connReplies(ctx), build: s.building, principals: s.principalReplies}
}

// principalReplies is the server's budgets of held reply bytes per
// principal (with authentication on): no principal holds more than share
// of the server's budget, so that one principal's unread replies (on as
// many connections as it likes) leave room for every other's. A
// principal's entry lives while a request of it holds or waits for
// bytes.
type principalReplies struct {
	share int64
	mu    sync.Mutex
	m     map[string]*principalBudget
}

type principalBudget struct {
	b    *replyBudget
	refs int // holds using b (under principalReplies.mu)
}

// principalShare is what one principal may hold of a server budget of
// max: a quarter, at least a connection's budget, at most all of it.
func principalShare(all int64) int64 {
	return min(all, max(maxConnReplyBytes, all/4))
}

func newPrincipalReplies(all int64) *principalReplies {
	return &principalReplies{share: principalShare(all), m: map[string]*principalBudget{}}
}

// attach is the budget of principal, held until detach.
func (p *principalReplies) attach(principal string) *principalBudget {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.m[principal]
	if e == nil {
		e = &principalBudget{b: newReplyBudget(p.share, 0)}
		p.m[principal] = e
	}
	e.refs++
	return e
}

// detach lets go of e (its bytes given back): the last hold removes it.
func (p *principalReplies) detach(principal string, e *principalBudget) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.refs--; e.refs == 0 {
		delete(p.m, principal)
	}
}

// len is the principals with an entry.
func (p *principalReplies) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m)
}

// setPrincipal records the caller of the hold's request (authorize, with
// authentication on; the first one found is kept).
func (h *replyHold) setPrincipal(name string) {
	if !h.authed {
		h.principal, h.authed = name, true
	}
}

// attachPrincipal looks up the budget of the hold's principal, when it
// has one and has not yet (a large reply: small ones never touch it).
func (h *replyHold) attachPrincipal() {
	if h.prin == nil && h.authed && h.principals != nil {
		h.prin = h.principals.attach(h.principal)
	}
}

// connReplies is the reply budget of the connection of ctx (nil: none,
// the peer port or Handler mounted elsewhere). A session stream looks it
// up once, not per request (its context's chain is long).
func connReplies(ctx context.Context) *replyBudget {
	if fc, ok := ctx.Value(fairConnKey{}).(*fairConn); ok {
		return fc.replies
	}
	return nil
}

func withReplyHold(ctx context.Context, h *replyHold) context.Context {
	return context.WithValue(ctx, replyHoldKey{}, h)
}

// limit is the most one reply may hold (a reply larger than a budget
// holds all of it, so it is not kept waiting forever).
func (h *replyHold) limit() int64 {
	l := h.all.max
	if h.conn != nil {
		l = min(l, h.conn.max)
	}
	if h.prin != nil {
		l = min(l, h.prin.b.max)
	}
	return l
}

// takeGuess takes its connection's guess before a read (see budgeted).
func (h *replyHold) takeGuess(ctx context.Context) error {
	if h.conn == nil || h.heldConn > 0 {
		return nil
	}
	if g, ok := h.conn.tryGuess(); ok {
		h.heldConn = g
		return nil
	}
	// Counted as waiting only when it waits.
	h.all.count(0, 1)
	defer h.all.count(0, -1)
	g, err := h.conn.takeGuess(ctx)
	h.heldConn = g
	return err
}

// takeBuild takes n bytes (at most the build budget: a reply larger than
// it is made alone) of the server's build budget, waiting for builds in
// progress to end, and returns what it took (0: no build budget).
func (h *replyHold) takeBuild(ctx context.Context, n int64) (int64, error) {
	if h.build == nil {
		return 0, nil
	}
	n = min(n, h.build.max)
	if h.build.try(n) {
		return n, nil
	}
	// Counted apart from the replies waiting for room to be held.
	h.build.count(0, 1)
	defer h.build.count(0, -1)
	if err := h.build.take(ctx, n); err != nil {
		return 0, err
	}
	return n, nil
}

// reach makes the hold need bytes in both budgets: it gives back what is
// over, and takes what is missing, waiting for room until ctx ends when
// wait is set, else only if there is room now (ok false: it took
// nothing).
func (h *replyHold) reach(ctx context.Context, need int64, wait bool) (ok bool, err error) {
	if wait {
		h.all.count(0, 1)
		defer h.all.count(0, -1)
	}
	take := func(b *replyBudget, n int64) error {
		if wait {
			return b.take(ctx, n)
		}
		if !b.try(n) {
			return errNoRoom
		}
		return nil
	}
	// In this order always: the connection's, the principal's, the
	// server's.
	var tookConn, tookPrin int64
	undo := func() {
		h.conn.give(tookConn) // tookConn > 0 only with h.conn
		h.heldConn -= tookConn
		if tookPrin > 0 {
			h.prin.b.give(tookPrin)
			h.heldPrin -= tookPrin
		}
	}
	if h.conn != nil {
		if d := need - h.heldConn; d < 0 {
			h.conn.give(-d)
			h.heldConn = need
		} else if d > 0 {
			if err := take(h.conn, d); err != nil {
				return false, err
			}
			h.heldConn, tookConn = need, d
		}
	}
	if h.prin != nil {
		if d := need - h.heldPrin; d < 0 {
			h.prin.b.give(-d)
			h.heldPrin = need
		} else if d > 0 {
			if err := take(h.prin.b, d); err != nil {
				undo()
				return false, err
			}
			h.heldPrin, tookPrin = need, d
		}
	}
	before := h.heldAll
	if d := need - h.heldAll; d < 0 {
		h.all.give(-d)
		h.heldAll = need
	} else if d > 0 {
		if err := take(h.all, d); err != nil {
			undo()
			return false, err
		}
		h.heldAll = need
	}
	h.countHold(before)
	return true, nil
}

// errNoRoom: reach without waiting found no room.
var errNoRoom = errors.New("no room in a reply budget")

// countHold counts the hold in or out of the server's holds as its bytes
// there went from before to none or back.
func (h *replyHold) countHold(before int64) {
	switch {
	case before == 0 && h.heldAll > 0:
		h.all.count(1, 0)
	case before > 0 && h.heldAll == 0:
		h.all.count(-1, 0)
	}
}

// release gives back everything held (nil: nothing), and lets go of the
// principal's budget.
func (h *replyHold) release() {
	if h == nil {
		return
	}
	h.giveBack()
	if h.prin != nil {
		h.principals.detach(h.principal, h.prin)
		h.prin = nil
	}
}

// giveBack gives back every byte held, keeping the principal's budget
// (the request waits for room next).
func (h *replyHold) giveBack() {
	if h.conn != nil {
		h.conn.give(h.heldConn)
	}
	h.heldConn = 0
	if h.prin != nil {
		h.prin.b.give(h.heldPrin)
	}
	h.heldPrin = 0
	before := h.heldAll
	h.all.give(h.heldAll)
	h.heldAll = 0
	h.countHold(before)
}

// holdReplies gives each request a hold on the reply budgets, released
// once its handler has returned: its reply is written by then (over
// HTTP/2 a handler's write returns once its frames are written).
func (s *Server) holdReplies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := s.newReplyHold(r.Context())
		defer h.release()
		next.ServeHTTP(w, r.WithContext(withReplyHold(r.Context(), h)))
	})
}

// budgeted makes a read's reply hold its cost in the reply budgets of its
// request before it is kept (see above), and each making of it hold build
// (what the reply may cost at most) in the server's build budget while
// it is made. cost is what a reply costs once made. Without a hold in ctx
// (Handler mounted without holdReplies) it runs do as it is.
func budgeted[Res any, P interface {
	*Res
	proto.Message
}](build func() int64, cost func(*Res) int64, do call[Res]) call[Res] {
	return func(ctx context.Context) (*Res, bool, error) {
		h, _ := ctx.Value(replyHoldKey{}).(*replyHold)
		if h == nil {
			return do(ctx)
		}
		// The connection's guess first: a connection whose replies are
		// large, and not read, has its reads wait before they make a
		// reply, not after.
		if err := h.takeGuess(ctx); err != nil {
			h.release()
			return nil, false, err
		}
		for {
			b, err := h.takeBuild(ctx, build())
			if err != nil {
				h.release()
				return nil, false, err
			}
			out, replayed, err := do(ctx)
			if err != nil {
				h.build.give(b)
				h.release()
				return out, replayed, err
			}
			need := replyCostFactor * int64(proto.Size(P(out)))
			if cost != nil {
				need += cost(out)
			}
			if need < replySmall {
				need = 0
			} else {
				// The caller is known now (authorize ran in do).
				h.attachPrincipal()
			}
			need = min(need, h.limit())
			if h.conn != nil {
				h.conn.setGuess(need)
			}
			ok, _ := h.reach(ctx, need, false)
			// The reply holds its own cost now, or is dropped: its
			// making is over.
			h.build.give(b)
			if ok {
				return out, replayed, nil
			}
			// No room: wait for it holding nothing of the reply, then
			// read again (its size may have changed). What the hold had
			// is given back first: a wait holds no server bytes while it
			// waits for its connection's (always taken in that order).
			out = nil
			h.giveBack()
			if _, err := h.reach(ctx, need, true); err != nil {
				h.release()
				return nil, false, err
			}
		}
	}
}
