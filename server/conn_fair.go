package server

import (
	"container/list"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The connection cap is fair to clients that have shown they are clients.
//
// A connection is *proven* once a request on it has been accepted as a
// client's (proveConn: with authentication on, once a caller on it has
// authenticated; without, once it carries any HTTP request). Until then it
// is *unproven*, and it
//   - is closed UnprovenTimeout after it was accepted (default: the
//     header timeout), where a proven idle one lives IdleTimeout;
//   - gives up its slot to a newcomer when every slot of MaxConns is taken:
//     the oldest unproven connection is closed to make room, once it has
//     been open evictGrace (a client sends its first request within
//     milliseconds of connecting: clients arriving together at the cap
//     wait for each other, as before, instead of closing each other).
//
// The grace bounds how fast newcomers are admitted while every slot is
// held by unproven connections: MaxConns per evictGrace. A flood of N
// silent sockets kept in the kernel's accept queue delays a client by
// about N / MaxConns × evictGrace (an outside test at 1 s: 240 sockets
// against --max-conns 8 delayed a probe 26–29 s; at 100 ms, 3 s).
//
// So sockets that connect and say nothing (or only fail to authenticate)
// cannot hold the cap against clients: a newcomer always gets a slot while
// any slot is held by an unproven connection, and only when all MaxConns
// are proven clients does Accept wait for one to close, as before.

// DefaultMaxConnsPerPrincipal is the default of
// Config.MaxConnsPerPrincipal: a quarter of DefaultMaxConns, so that one
// principal cannot take every slot from the others.
const DefaultMaxConnsPerPrincipal = DefaultMaxConns / 4

// connCount counts open connections, the most ever open at once, and the
// unproven ones closed by the cap.
type connCount struct {
	open, peak atomic.Int64
	// evicted: unproven connections closed to give their slot to a
	// newcomer; expired: unproven connections closed by UnprovenTimeout.
	evicted, expired atomic.Int64
}

// fairListener caps open connections at max (see above).
type fairListener struct {
	net.Listener
	n           *connCount
	slots       chan struct{} // one token per open connection, max of them
	unprovenFor time.Duration

	mu       sync.Mutex
	unproven *list.List // of *fairConn, oldest first
}

func newFairListener(ln net.Listener, max int, unprovenFor time.Duration, n *connCount) *fairListener {
	return &fairListener{Listener: ln, n: n, slots: make(chan struct{}, max), unprovenFor: unprovenFor, unproven: list.New()}
}

func (l *fairListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.takeSlot()
	fc := &fairConn{Conn: c, l: l, accepted: time.Now(), replies: newReplyBudget(maxConnReplyBytes, firstGuess)}
	l.mu.Lock()
	fc.elem = l.unproven.PushBack(fc)
	l.mu.Unlock()
	fc.timer = time.AfterFunc(l.unprovenFor, func() {
		if !fc.proven.Load() && !fc.closed.Load() {
			l.n.expired.Add(1)
			fc.Close()
		}
	})
	open := l.n.open.Add(1)
	for {
		p := l.n.peak.Load()
		if open <= p || l.n.peak.CompareAndSwap(p, open) {
			break
		}
	}
	return fc, nil
}

// evictGrace is how long an unproven connection keeps its slot before a
// newcomer may take it.
const evictGrace = 100 * time.Millisecond

// takeSlot takes a slot for a newcomer: a free one, else the slot of the
// oldest unproven connection open evictGrace, else it waits for one of
// these.
func (l *fairListener) takeSlot() {
	for {
		select {
		case l.slots <- struct{}{}:
			return
		default:
		}
		wait := time.Duration(-1) // no unproven connection: wait for a slot
		if v := l.oldestUnproven(); v != nil {
			if age := time.Since(v.accepted); age >= evictGrace {
				l.n.evicted.Add(1)
				v.Close() // frees its slot (or a closing one just did)
				continue
			} else {
				wait = evictGrace - age
			}
		}
		if wait < 0 {
			l.slots <- struct{}{}
			return
		}
		t := time.NewTimer(wait)
		select {
		case l.slots <- struct{}{}:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// oldestUnproven is the unproven connection accepted first (nil: none).
func (l *fairListener) oldestUnproven() *fairConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.unproven.Front(); e != nil {
		return e.Value.(*fairConn)
	}
	return nil
}

// fairConn is one connection of a fairListener.
type fairConn struct {
	net.Conn
	l        *fairListener
	elem     *list.Element // in l.unproven while unproven and open (under l.mu)
	accepted time.Time
	// release gives back the connection's place in its principal's count
	// (set once, by admitConn; called by Close).
	release atomic.Pointer[func()]
	timer   *time.Timer
	proven  atomic.Bool
	closed  atomic.Bool
	// freed: its slot (and place in its principal's count) was given
	// back, by Close or by an SSE watch it carries (freeSlot).
	freed   atomic.Bool
	replies *replyBudget // reply bytes held for this connection (reply_budget.go)
}

// prove marks the connection proven: it keeps its slot and lives
// IdleTimeout when idle.
func (c *fairConn) prove() {
	if c.proven.Load() || !c.proven.CompareAndSwap(false, true) {
		return
	}
	c.timer.Stop()
	c.l.mu.Lock()
	if c.elem != nil {
		c.l.unproven.Remove(c.elem)
		c.elem = nil
	}
	c.l.mu.Unlock()
}

// CloseWrite closes the sending side of a TCP connection.
func (c *fairConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Close closes the connection and frees its slot (once).
func (c *fairConn) Close() error {
	err := c.Conn.Close()
	if c.closed.CompareAndSwap(false, true) {
		c.timer.Stop()
		c.l.mu.Lock()
		if c.elem != nil {
			c.l.unproven.Remove(c.elem)
			c.elem = nil
		}
		c.l.mu.Unlock()
		c.freeSlot()
	}
	return err
}

// freeSlot gives the connection's slot of MaxConns and its place in its
// principal's count back, once: at Close, or earlier when it carries an
// SSE watch (giveConnSlotToWatch).
func (c *fairConn) freeSlot() {
	if c.freed.CompareAndSwap(false, true) {
		c.l.n.open.Add(-1)
		<-c.l.slots
		if r := c.release.Swap(nil); r != nil {
			(*r)()
		}
	}
}

// watchSendBuffer is the kernel send buffer of a connection given to a
// watch (giveConnSlotToWatch): a watch whose client does not read blocks
// after about a page of its state, instead of the server reading and
// encoding megabytes into an autotuned buffer (up to tcp_wmem's max, 4
// MiB: an outside test saw 2.8 MB queued per idle watch).
const watchSendBuffer = 64 << 10

// giveConnSlotToWatch gives the slot of the connection of ctx back while
// a watch holds the connection (HTTP/1.1: it carries nothing else until
// closed; the watch holds a slot of --max-watches instead), and bounds
// its kernel send buffer at watchSendBuffer. A request of the peer port,
// or of a listener that is not Serve's, is a no-op.
func giveConnSlotToWatch(ctx context.Context) {
	if fc, ok := ctx.Value(fairConnKey{}).(*fairConn); ok {
		fc.prove()
		fc.freeSlot()
		if tc, ok := fc.Conn.(interface{ SetWriteBuffer(int) error }); ok {
			_ = tc.SetWriteBuffer(watchSendBuffer)
		}
	}
}

// watchHoldsConn is called once a watch is admitted: on HTTP/1.x (SSE,
// Connect or gRPC-Web streaming alike) the connection's slot goes back
// (giveConnSlotToWatch) and the connection is closed when the watch ends
// rather than taking a slot again. Over HTTP/2 the connection carries
// other calls: it keeps its slot.
func (c *streamConn) watchHoldsConn(ctx context.Context) {
	if c != nil && c.http1 {
		giveConnSlotToWatch(ctx)
		c.header.Set("Connection", "close")
	}
}

type fairConnKey struct{}

// withFairConn is part of the http.Server's ConnContext: a request's
// context knows the client connection it came on (under TLS, the one the
// TLS connection runs over, under tlsListener's plaintextCheck).
func withFairConn(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if pc, ok := c.(*plaintextCheck); ok {
		c = pc.Conn
	}
	if fc, ok := c.(*fairConn); ok {
		return context.WithValue(ctx, fairConnKey{}, fc)
	}
	return ctx
}

// proveConn marks the connection r came on proven (see above); a request
// of the peer port, or of a listener that is not Serve's, is a no-op.
func proveConn(ctx context.Context) {
	if fc, ok := ctx.Value(fairConnKey{}).(*fairConn); ok {
		fc.prove()
	}
}

// proveConns proves the connection of every request that reaches the
// server's handler while authentication is off (any HTTP request is then
// a client's). With checking on, a connection is proven only by a call
// whose caller authenticated (identify).
func (s *Server) proveConns(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.deps.Auth == nil || !s.deps.Auth.AuthEnabled() {
			proveConn(r.Context())
		}
		next.ServeHTTP(w, r)
	})
}

// admitConn proves the connection of ctx for principal, and counts it as
// principal's if no principal had it yet. A principal at max connections
// is refused on one more (its connection stays unproven, so it goes soon).
//
// quota is the principal's own (its roles' SetRoleQuota), 0 for the
// server's --max-conns-per-principal.
func (s *Server) admitConn(ctx context.Context, principal string, quota int) error {
	fc, ok := ctx.Value(fairConnKey{}).(*fairConn)
	if !ok {
		return nil // the peer port, or a listener that is not Serve's
	}
	if fc.release.Load() == nil {
		if quota <= 0 {
			quota = s.cfg.MaxConnsPerPrincipal
		}
		release, err := s.principalConns.take(principal, quota, "connections", "max_conns_per_principal")
		if err != nil {
			return err
		}
		if !fc.release.CompareAndSwap(nil, &release) {
			release() // another call on the connection counted it first
		} else if fc.closed.Load() || fc.freed.Load() {
			// Closed (or its slot given to a watch) while being counted:
			// freeSlot may have looked before.
			if r := fc.release.Swap(nil); r != nil {
				(*r)()
			}
		}
	}
	fc.prove()
	return nil
}
