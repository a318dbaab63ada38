package server

import (
	"context"
	"net/http"
	"sync"

	"google.golang.org/protobuf/proto"
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
//     the peer port) hold at most that much.
//
// A reservation is held until the reply is written (a unary call: its
// handler returned; a session stream: the reply was sent) or the request
// ends. A reply that finds no room *waits* for it, bounded by its
// request's context (a unary call's deadline, the client going away, the
// stream ending), and while it waits it holds none of its bytes: the reply
// is dropped and the read made again once room is reserved (reads propose
// nothing; the second is as linearizable as the first). Waiting rather
// than refusing: a client that reads its replies gets them all, its
// replies beyond the budget being built as earlier ones are written (on
// loopback, milliseconds); only a client that does not read waits, for
// room its own unread replies hold, until WriteTimeout frees it.
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
	// (TestUnreadLargeRepliesAreBounded).
	replyCostFactor = 3
)

// replyBudget is a budget of reply bytes: reservations wait for room.
type replyBudget struct {
	max int64

	mu    sync.Mutex
	used  int64
	freed chan struct{} // closed (and replaced) when bytes are given back
	// holds: reservations holding bytes now; waiting: replies waiting for
	// room (counted in the server's budget only).
	holds, waiting int64
}

func newReplyBudget(max int64) *replyBudget {
	return &replyBudget{max: max, freed: make(chan struct{})}
}

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

// give gives back n bytes.
func (b *replyBudget) give(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

// count adds to the reservations holding bytes and the replies waiting.
func (b *replyBudget) count(holds, waiting int64) {
	b.mu.Lock()
	b.holds += holds
	b.waiting += waiting
	b.mu.Unlock()
}

// state is the bytes reserved, the reservations holding them and the
// replies waiting for room.
func (b *replyBudget) state() (used, holds, waiting int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.holds, b.waiting
}

// replyHold is what one request (a unary call, or one request of a
// session stream) holds of the budgets of its connection (conn: nil on
// the peer port or with Handler mounted elsewhere) and of the server.
type replyHold struct {
	conn, all *replyBudget

	mu   sync.Mutex
	held int64
}

type replyHoldKey struct{}

// newReplyHold is a hold on the budgets of the request of ctx.
func (s *Server) newReplyHold(ctx context.Context) *replyHold {
	h := &replyHold{all: s.replies}
	if fc, ok := ctx.Value(fairConnKey{}).(*fairConn); ok {
		h.conn = fc.replies
	}
	return h
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
	return l
}

// try takes n more bytes if both budgets have room now.
func (h *replyHold) try(n int64) bool {
	if h.conn != nil && !h.conn.try(n) {
		return false
	}
	if !h.all.try(n) {
		if h.conn != nil {
			h.conn.give(n)
		}
		return false
	}
	h.add(n)
	return true
}

// take takes n more bytes, waiting for room (the connection's first,
// then the server's) until ctx ends.
func (h *replyHold) take(ctx context.Context, n int64) error {
	h.all.count(0, 1)
	defer h.all.count(0, -1)
	if h.conn != nil {
		if err := h.conn.take(ctx, n); err != nil {
			return err
		}
	}
	if err := h.all.take(ctx, n); err != nil {
		if h.conn != nil {
			h.conn.give(n)
		}
		return err
	}
	h.add(n)
	return nil
}

func (h *replyHold) add(n int64) {
	h.mu.Lock()
	first := h.held == 0 && n > 0
	h.held += n
	h.mu.Unlock()
	if first {
		h.all.count(1, 0)
		if h.conn != nil {
			h.conn.count(1, 0)
		}
	}
}

// give gives back n of the bytes held.
func (h *replyHold) give(n int64) {
	if n <= 0 {
		return
	}
	h.mu.Lock()
	n = min(n, h.held)
	h.held -= n
	last := h.held == 0 && n > 0
	h.mu.Unlock()
	if h.conn != nil {
		h.conn.give(n)
	}
	h.all.give(n)
	if last {
		h.all.count(-1, 0)
		if h.conn != nil {
			h.conn.count(-1, 0)
		}
	}
}

// release gives back everything held (nil: nothing).
func (h *replyHold) release() {
	if h == nil {
		return
	}
	h.mu.Lock()
	n := h.held
	h.mu.Unlock()
	h.give(n)
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
// request before it is kept (see above). Without a hold in ctx (Handler
// mounted without holdReplies) it runs do as it is.
func budgeted[Res any, P interface {
	*Res
	proto.Message
}](do call[Res]) call[Res] {
	return func(ctx context.Context) (*Res, bool, error) {
		h, _ := ctx.Value(replyHoldKey{}).(*replyHold)
		if h == nil {
			return do(ctx)
		}
		var held int64 // reserved for this reply
		for {
			out, replayed, err := do(ctx)
			if err != nil {
				h.give(held)
				return out, replayed, err
			}
			need := replyCostFactor * int64(proto.Size(P(out)))
			if need < replySmall {
				need = 0
			}
			need = min(need, h.limit())
			if need <= held {
				h.give(held - need)
				return out, replayed, nil
			}
			if h.try(need - held) {
				return out, replayed, nil
			}
			// No room: wait for it holding nothing of the reply, then
			// read again (its size may have changed).
			out = nil
			if err := h.take(ctx, need-held); err != nil {
				h.give(held)
				return nil, false, err
			}
			held = need
		}
	}
}
