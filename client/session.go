package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// session is a Client's server session: one TTL and one keepalive for all
// the leases acquired on it, and one long-lived bidi stream
// (SessionService.Stream) that carries its requests, replies and
// keepalives.
//
// It opens on the first session-bound call (Client.Acquire without TTL or
// KeepAlive, Write, Add, Delete, Release) with a unary Open. From then on
// one goroutine (run, stream.go) holds the stream: it sends what is queued
// and the keepalives, and reconnects when the stream breaks; a second one
// per stream reads the replies. Leases of the session are entries of one
// map; one timer watches the session's safe deadline for all of them.
//
// The session ends (every lease lost, every call waiting on it failed) when
// its safe deadline passes without a successful keepalive, when the server
// answers SESSION_EXPIRED, or when the Client is closed. The next
// session-bound call opens a new one. gen counts the ends: a lease or a
// call of an earlier generation belongs to a session that is gone.
type session struct {
	c     *Client
	hc    *http.Client // every endpoint's SessionService client uses it
	conns *connTracker // nil with WithHTTPClient: the stream's connection is not ours to close
	copts []connect.ClientOption

	openSem  chan struct{} // one Open at a time
	wake     chan struct{} // run has something to do (cap 1)
	closing  chan struct{} // closed by close
	loopDone chan struct{} // closed when run returns (only if it started)

	mu          sync.Mutex
	id          uint64 // 0: no session open
	gen         uint64
	ttl         time.Duration
	unsupported bool // the server has no SessionService: leases are standalone
	closed      bool
	started     bool // run is running
	deadline    time.Time
	lastSent    time.Time // send time of the last successful keepalive (or the open)
	lastErr     error     // why the last keepalive failed; nil after a success
	timer       *time.Timer
	leases      map[fence.Token]*Lease
	calls       callTable
	ka          *call     // the keepalive in flight, if any
	kaRetry     time.Time // after a refused keepalive: not before then
	// deferred: calls the server had no room for on the stream, sent
	// again at deferUntil.
	deferred   []*call
	deferUntil time.Time
	// streamCancel cancels the current stream (close uses it to stop a
	// Send that blocks).
	streamCancel context.CancelFunc

	// followerSeen (cap 1): a keepalive reply said its node is a follower
	// (follow_leader.go); lastMove: when the stream was last moved to the
	// leader (run's goroutine only).
	followerSeen chan struct{}
	lastMove     time.Time
}

func newSession(c *Client, copts []connect.ClientOption) *session {
	s := &session{
		c: c, ttl: c.cfg.sessionTTL,
		openSem: make(chan struct{}, 1), wake: make(chan struct{}, 1), followerSeen: make(chan struct{}, 1),
		closing: make(chan struct{}), loopDone: make(chan struct{}),
		leases: map[fence.Token]*Lease{},
		copts:  copts,
	}
	s.calls.init()
	if c.cfg.userHTTPClient {
		s.hc = c.cfg.httpClient
	} else {
		s.conns = &connTracker{}
		s.hc = streamHTTPClient(c.cfg.dialer, c.cfg.tls, s.conns, c.cfg.sessionTTL)
	}
	for _, ep := range c.endpoints {
		ep.sessions = fencev1connect.NewSessionServiceClient(s.hc, ep.url, copts...)
	}
	return s
}

// streamHTTPClient speaks HTTP/2 — h2c for http://, by ALPN over TLS
// (tlsCfg, if set) for https:// — which a bidi stream needs, over
// connections (opened with dial, if set) that conns records so that a
// stream that hangs can have its connection cut. A connection that sends
// no frame for streamPingEvery(ttl) is pinged, and closed when the ping is
// not answered within that time again: a stopped or cut-off node is left
// within two of those (a fifth of the session's TTL at most), before the
// keepalive deadline (TTL/3 after a keepalive was sent) would notice it.
func streamHTTPClient(dial dialFunc, tlsCfg *tls.Config, conns *connTracker, ttl time.Duration) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Protocols = http2Only()
	every := streamPingEvery(ttl)
	t.HTTP2 = &http.HTTP2Config{SendPingTimeout: every, PingTimeout: every}
	setTLS(t, tlsCfg)
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err == nil {
			conns.add(conn)
		}
		return conn, err
	}
	return &http.Client{Transport: t}
}

// streamPingEvery is the HTTP/2 health check of a session's stream
// connection for a session of ttl: a tenth of it, within [250ms, 2s].
func streamPingEvery(ttl time.Duration) time.Duration {
	return min(max(ttl/10, 250*time.Millisecond), 2*time.Second)
}

// connTracker remembers the open connections of the stream's transport.
type connTracker struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (t *connTracker) add(c net.Conn) {
	t.mu.Lock()
	t.conns = append(t.conns, c)
	t.mu.Unlock()
}

// cut closes every connection: a stream whose connection stopped
// answering fails at once, and the next one dials afresh.
func (t *connTracker) cut() {
	t.mu.Lock()
	conns := t.conns
	t.conns = nil
	t.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// errNoSessions: the server has no SessionService; the Client uses
// standalone leases and unary calls.
var errNoSessions = errors.New("fence: the server does not support sessions")

// ensureOpen opens the session if none is open and returns its generation.
// It returns errNoSessions if the server does not support sessions.
func (s *session) ensureOpen(ctx context.Context) (uint64, error) {
	select {
	case s.openSem <- struct{}{}:
	case <-ctx.Done():
		return 0, withCause(ctx, ctx.Err())
	}
	defer func() { <-s.openSem }()
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return 0, ErrClientClosed
	case s.unsupported:
		s.mu.Unlock()
		return 0, errNoSessions
	case s.id != 0:
		gen := s.gen
		s.mu.Unlock()
		return gen, nil
	}
	ttl := s.ttl
	s.mu.Unlock()

	req := openToProto(fence.OpenSessionRequest{TTL: ttl, RequestID: newID()})
	var resp *fencev1.OpenSessionResponse
	var sent time.Time
	err := s.c.withRetry(ctx, "open session", 0, func(ctx context.Context, ep *endpoint, _ int) error {
		sent = time.Now()
		r, err := ep.sessions.Open(ctx, connect.NewRequest(req))
		if err != nil {
			return err
		}
		if info := r.Msg.GetSession(); r.Msg.GetReplayed() && nearlyOver(sent, info, s.c.cfg.drift) {
			// A retry answered with the session an earlier attempt opened,
			// whose reply was lost: its time ran down meanwhile (its
			// keepalives were never sent). Adopted, it would end at once
			// and fail the calls queued on it: close it, open another.
			go s.closeOnServer(info.GetId())
			req.RequestId = newID()
			return errAskAgain
		}
		resp = r.Msg
		return nil
	})
	if err != nil {
		if connect.CodeOf(err) == connect.CodeUnimplemented || connect.CodeOf(err) == connect.CodeNotFound {
			s.mu.Lock()
			s.unsupported = true
			s.mu.Unlock()
			s.c.cfg.logger.Warn("fence: the server does not support sessions; using standalone leases", "err", err)
			return 0, errNoSessions
		}
		return 0, err
	}
	info := resp.GetSession()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		go s.closeOnServer(info.GetId())
		return 0, ErrClientClosed
	}
	s.id = info.GetId()
	s.gen++
	if d := info.GetTtl().AsDuration(); d > 0 {
		s.ttl = d
	}
	s.lastSent, s.lastErr = sent, nil
	s.deadline = fence.SafeDeadline(sent, info.GetRemaining().AsDuration(), s.c.cfg.drift)
	if s.timer == nil {
		s.timer = time.AfterFunc(time.Until(s.deadline), s.checkDeadline)
	} else {
		s.timer.Reset(time.Until(s.deadline))
	}
	s.calls.reset()
	if !s.started {
		s.started = true
		go s.run()
	}
	s.kick()
	s.c.cfg.logger.Debug("fence: session opened", "session", s.id, "ttl", s.ttl)
	return s.gen, nil
}

// nearlyOver reports a session answered with less than a third of its
// TTL left before its safe deadline: less than a keepalive period.
func nearlyOver(sent time.Time, info *fencev1.Session, drift float64) bool {
	left := time.Until(fence.SafeDeadline(sent, info.GetRemaining().AsDuration(), drift))
	return left < info.GetTtl().AsDuration()/3
}

// kick wakes run.
func (s *session) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// isOpen reports whether s is a session that is open now (nil: none).
func (s *session) isOpen() bool { return s != nil && s.ID() != 0 }

// ID is the session's id, 0 while none is open.
func (s *session) ID() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

func (s *session) ttlOf() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ttl
}

// deadlineOf is the safe deadline of generation gen, if it is the current
// one.
func (s *session) deadlineOf(gen uint64) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen || s.id == 0 {
		return time.Time{}, false
	}
	return s.deadline, true
}

func (s *session) keepAliveErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// extend moves the safe deadline after a successful keepalive (or renew)
// of generation gen sent at sent, which found remaining left. The newest
// send wins, an older one can only pull the deadline in; a reply that comes
// after the deadline passed does not revive the session (its leases may
// have been reported lost already).
func (s *session) extend(gen uint64, sent time.Time, info *fencev1.Session, remaining time.Duration) {
	s.mu.Lock()
	if s.gen != gen || s.id == 0 {
		s.mu.Unlock()
		return
	}
	if !time.Now().Before(s.deadline) {
		s.mu.Unlock()
		s.checkDeadline()
		return
	}
	d := fence.SafeDeadline(sent, remaining, s.c.cfg.drift)
	newer := sent.After(s.lastSent)
	if newer || d.Before(s.deadline) {
		s.deadline = d
		s.timer.Reset(time.Until(d))
	}
	if newer {
		s.lastSent = sent
		if t := info.GetTtl().AsDuration(); t > 0 {
			s.ttl = t
		}
	}
	s.lastErr = nil
	s.mu.Unlock()
}

// checkPassed ends the session now if its safe deadline has passed, even
// if the timer has not run yet (Lease.Err never lags the clock).
func (s *session) checkPassed() {
	s.mu.Lock()
	passed := s.id != 0 && !time.Now().Before(s.deadline)
	s.mu.Unlock()
	if passed {
		s.checkDeadline()
	}
}

// checkDeadline runs when the deadline timer fires: unless a keepalive
// moved the deadline meanwhile, the session's leases are lost. The session
// is then abandoned: it is closed on the server (best effort; if that
// fails it expires there by its TTL), and the next call opens a new one.
func (s *session) checkDeadline() {
	s.mu.Lock()
	if s.id == 0 {
		s.mu.Unlock()
		return
	}
	if wait := time.Until(s.deadline); wait > 0 {
		s.timer.Reset(wait)
		s.mu.Unlock()
		return
	}
	cause := ErrDeadlinePassed
	if s.lastErr != nil {
		cause = fmt.Errorf("%w (last renew error: %v)", ErrDeadlinePassed, s.lastErr)
	}
	id, gen := s.id, s.gen
	s.mu.Unlock()
	if s.end(gen, cause, fmt.Errorf("fence: session %d lost: %w", id, cause)) {
		// The stream got no keepalive through in time: do not wait for it
		// (a Send may be stuck on a silent connection).
		if s.conns != nil {
			s.conns.cut()
		}
		go s.closeOnServer(id)
	}
}

// end ends generation gen of the session: every lease is lost with cause
// (wrapped in a *LostError), every call still waiting fails with callErr.
// It reports whether it ended it (false: it had ended already).
func (s *session) end(gen uint64, cause, callErr error) bool {
	s.mu.Lock()
	if s.gen != gen || s.id == 0 {
		s.mu.Unlock()
		return false
	}
	id := s.id
	s.id = 0
	s.gen++
	deadline := s.deadline
	leases := s.leases
	s.leases = map[fence.Token]*Lease{}
	waiting := s.calls.takeAll()
	s.deferred, s.deferUntil, s.ka = nil, time.Time{}, nil
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	s.kick()
	s.c.cfg.logger.Warn("fence: session ended", "session", id, "leases", len(leases), "err", cause)
	for _, c := range waiting {
		c.finish(nil, callErr)
	}
	for _, l := range leases {
		l.mu.Lock()
		l.extra().deadline = deadline
		l.mu.Unlock()
		l.stop(&LostError{Name: l.name, Token: l.token, Cause: cause})
	}
	return true
}

// expired handles SESSION_EXPIRED from the server for generation gen.
func (s *session) expired(gen uint64, err error) {
	s.end(gen, err, err)
}

// closeTimeout bounds the Close of a session on the server: freeing
// thousands of leases is one apply, but a slow one.
const closeTimeout = 5 * time.Second

// closeOnServer closes session id on the server, best effort (within
// closeTimeout: one attempt per endpoint, moving to the next one only when
// an attempt could not connect or was answered Unavailable), so that its
// leases are freed now rather than when it expires.
//
// With a transport of its own (not WithHTTPClient) the call goes over a
// new connection: close and checkDeadline have just cut the stream's
// connections, and HTTP/2's pool hands out a cut one until its read loop
// has seen the cut — the call then failed with "use of closed network
// connection" and the session's locks stayed held until its TTL (about
// one close in twenty under load).
func (s *session) closeOnServer(id uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	hc := s.hc
	if s.conns != nil {
		conns := &connTracker{}
		hc = streamHTTPClient(s.c.cfg.dialer, s.c.cfg.tls, conns, s.c.cfg.sessionTTL)
		defer conns.cut()
	}
	var err error
	for range s.c.endpoints {
		ep := s.c.pick()
		sessions := fencev1connect.NewSessionServiceClient(hc, ep.url, s.copts...)
		_, err = sessions.Close(ctx, connect.NewRequest(&fencev1.CloseSessionRequest{Session: id}))
		if err == nil || !failoverOn(err) || ctx.Err() != nil {
			break
		}
		s.c.failover(ep)
	}
	if err != nil {
		s.c.cfg.logger.Debug("fence: closing session failed; it expires by its TTL", "session", id, "err", err)
	}
}

// adopt records a lease granted on generation gen. If that generation has
// ended meanwhile the lease is lost at once.
func (s *session) adopt(l *Lease) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.stop(ErrClientClosed)
		return ErrClientClosed
	}
	if s.gen != l.gen || s.id == 0 {
		s.mu.Unlock()
		err := &LostError{Name: l.name, Token: l.token, Cause: fmt.Errorf("%w: the session ended while the lease was granted", ErrDeadlinePassed)}
		l.stop(err)
		return err
	}
	s.leases[l.token] = l
	s.mu.Unlock()
	return nil
}

// forget removes an ended lease.
func (s *session) forget(l *Lease) {
	s.mu.Lock()
	if s.leases[l.token] == l {
		delete(s.leases, l.token)
	}
	s.mu.Unlock()
}

// leaseOf returns the lease of this session with token, if any.
func (s *session) leaseOf(token fence.Token) *Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leases[token]
}

// close ends the session for Client.Close: its leases end with
// ErrClientClosed (they are in no map of the Client's), calls waiting fail
// with it, run stops, and the session is closed on the server so that its
// leases are freed at once.
func (s *session) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	id, started := s.id, s.started
	s.id = 0
	s.gen++
	leases := s.leases
	s.leases = map[fence.Token]*Lease{}
	waiting := s.calls.takeAll()
	s.deferred, s.deferUntil, s.ka = nil, time.Time{}, nil
	if s.timer != nil {
		s.timer.Stop()
	}
	cancelStream := s.streamCancel
	s.mu.Unlock()
	for _, l := range leases {
		l.stop(ErrClientClosed)
	}
	close(s.closing)
	for _, c := range waiting {
		c.finish(nil, ErrClientClosed)
	}
	// A Send blocked on a connection that stopped reading would keep run
	// from seeing closing: cancel the stream and cut its connection.
	if cancelStream != nil {
		cancelStream()
	}
	if s.conns != nil {
		s.conns.cut()
	}
	if started {
		<-s.loopDone
	}
	if id != 0 {
		s.closeOnServer(id)
	}
	s.hc.CloseIdleConnections()
	if s.conns != nil {
		s.conns.cut()
	}
}
