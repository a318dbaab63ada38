package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/leanwire"
)

// The lean session port (fence serve --session-addr) carries session
// streams — the same SessionRequest and SessionReply messages as
// SessionService.Stream, served by the same serveSession — over plain TCP
// or TLS with a framing of its own (api/leanwire) instead of HTTP/2 and
// Connect: one connection is one session stream, read by one goroutine
// (through a buffer: one read syscall for what arrived together) and
// written by one at a time (the replies ready together go out in one
// write, by the goroutine that queued one and found no other sending:
// stream.go, flushReplies). Its
// requests run on the stream workers like every stream's (no goroutine
// and no timer per request).
//
// What the API's stream has, it has too:
//   - TLS: with Config.TLS the listener is crypto/tls over TCP, the same
//     certificate and client CA as the API's port;
//   - authentication: the first frame is a hello carrying the bearer
//     token (and a client certificate counts as over HTTPS); the stream is
//     judged by the same identify/authorize as Stream (its end frame
//     carries the typed refusal, UNAUTHENTICATED or PERMISSION_DENIED);
//   - the connection cap: its own Config.MaxConns slots, counted in
//     fence_http_connections with the API's, unproven connections evicted
//     as on the API port (conn_fair.go); the per-principal quotas of
//     connections and streams;
//   - bounds: a frame's payload (the kind byte not counted) is at most
//     maxRequestBytes (a larger one ends the stream with invalid_argument
//     naming "body", before it is read), the requests and bytes in flight
//     as on Stream (dispatch);
//   - frame errors: every one (too large, empty, a length that overflows,
//     an unexpected kind, an unreadable message) ends the stream with an
//     end frame, invalid_argument naming the field ("body", "kind",
//     "version", "hello"), at any point of the stream; a stream ended
//     from elsewhere (a token revoked, a worker's failure) stops its reader
//     with a read deadline (closeBody), not a close, so its end frame is
//     still written; then closeGracefully half-closes and drains, so no
//     reset drops the end frame;
//   - a dead peer: the client sends a ping frame when it has sent nothing
//     for leanwire.PingEvery; a connection on which nothing arrived for
//     Config.SessionIdleTimeout is closed (its requests cancelled, waits withdrawn). A peer
//     that stops reading its replies stops being read (the goroutine
//     sending blocks, then the workers queuing replies, then the reader),
//     so it falls silent and is cut
//     the same way: no write deadline per batch is needed.

// DefaultSessionIdleTimeout is the default of Config.SessionIdleTimeout:
// three of the client's ping intervals.
const DefaultSessionIdleTimeout = 3 * leanwire.PingEvery

// leanListeners are the lean ports being served and their connections,
// for Shutdown and Close.
type leanListeners struct {
	mu    sync.Mutex
	lns   []net.Listener
	conns map[net.Conn]struct{}
	done  bool
}

// ServeSessions serves session streams on ln with the lean framing
// (api/leanwire) until Shutdown or Close; it then returns nil. With
// Config.TLS it serves TLS. At most Config.MaxConns connections are open
// on it at once (slots of its own; an unproven one gives way to a
// newcomer as on Serve's listener).
func (s *Server) ServeSessions(ln net.Listener) error {
	ln = newFairListener(ln, s.cfg.MaxConns, s.cfg.UnprovenTimeout, &s.conns)
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	s.lean.mu.Lock()
	if s.lean.done {
		s.lean.mu.Unlock()
		ln.Close()
		return nil
	}
	s.lean.lns = append(s.lean.lns, ln)
	s.lean.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			s.lean.mu.Lock()
			done := s.lean.done
			s.lean.mu.Unlock()
			if done {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		if !s.lean.add(c) {
			c.Close()
			return nil
		}
		go func() {
			defer s.lean.remove(c)
			s.serveLean(c)
		}()
	}
}

func (l *leanListeners) add(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return false
	}
	if l.conns == nil {
		l.conns = map[net.Conn]struct{}{}
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *leanListeners) remove(c net.Conn) {
	c.Close()
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// close stops the listeners and closes every connection.
func (l *leanListeners) close() {
	l.mu.Lock()
	l.done = true
	lns, conns := l.lns, l.conns
	l.lns, l.conns = nil, nil
	l.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
	for c := range conns {
		c.Close()
	}
}

// serveLean serves one lean connection: its hello, then its session stream.
func (s *Server) serveLean(c net.Conn) {
	// The handshake and the hello come within the time an unproven
	// connection is given on the API port.
	_ = c.SetDeadline(time.Now().Add(s.cfg.UnprovenTimeout))
	var creds credentials
	if tc, ok := c.(*tls.Conn); ok {
		if err := tc.Handshake(); err != nil {
			s.log.Debug("lean session port: TLS handshake failed", "remote", c.RemoteAddr(), "err", err)
			return
		}
		if cs := tc.ConnectionState(); len(cs.VerifiedChains) > 0 && len(cs.PeerCertificates) > 0 {
			creds.certNames = certNames(cs.PeerCertificates[0])
		}
	}
	lt := &leanTransport{c: c, writeTimeout: s.cfg.WriteTimeout, idle: s.cfg.SessionIdleTimeout, r: bufio.NewReaderSize(c, leanwire.BufferSize), w: bufio.NewWriterSize(c, leanwire.BufferSize)}
	kind, payload, err := lt.readFrame()
	if err == nil && kind != leanwire.KindHello {
		err = apierr.ToConnect(fence.Invalid("kind", fmt.Sprintf("%d (a hello) on the first frame", leanwire.KindHello), fmt.Sprint(kind)))
	}
	var h leanwire.Hello
	if err == nil {
		h, err = leanwire.ParseHello(payload)
		switch {
		case errors.Is(err, leanwire.ErrVersion):
			err = apierr.ToConnect(fence.Invalid("version", fmt.Sprintf("%d (the hello's version this server speaks)", leanwire.Version), fmt.Sprint(h.Version)))
		case err != nil:
			err = apierr.ToConnect(fence.Invalid("hello", "a protobuf message {1: version, 2: bearer token}", ""))
		}
	}
	if err != nil {
		if ce := new(connect.Error); !errors.As(err, &ce) {
			// The connection failed or timed out before its hello: no
			// frame error to report, but say why as the stream would.
			err = connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("lean session port: no hello: %w", err))
		}
		lt.end(err)
		lt.closeGracefully()
		return
	}
	if h.Token != "" {
		creds.header, creds.bearer = true, h.Token
	}
	_ = c.SetWriteDeadline(time.Time{})
	if h.Pongs {
		// The client learns that this server answers its pings.
		lt.pongs = true
		lt.pong()
	}
	ctx := withFairConn(context.WithValue(s.baseCtx, credentialsKey{}, creds), c)
	if s.deps.Auth == nil || !s.deps.Auth.AuthEnabled() {
		proveConn(ctx)
	}
	stop := lt.watchIdle()
	err = s.serveSession(ctx, lt)
	stop()
	lt.end(err)
	lt.closeGracefully()
}

// leanTransport is one session stream on the lean port (sessionTransport).
type leanTransport struct {
	c net.Conn
	r *bufio.Reader
	// w is written by the goroutine sending replies (flushReplies), by
	// Receive's pongs and by end, each under wmu.
	wmu    sync.Mutex
	w      *bufio.Writer
	pongs  bool         // the hello asked for pongs: every ping is answered
	buf    []byte       // the frame being read (reused)
	out    []byte       // the reply being encoded (reused)
	frames atomic.Int64 // frames read: watchIdle sees the peer is alive
	// writeTimeout bounds the end frame's write; idle is
	// Config.SessionIdleTimeout (watchIdle).
	writeTimeout, idle time.Duration
}

// readFrame reads one frame. A frame whose payload is over
// maxRequestBytes is refused before its payload is read. A frame error
// (the framing is lost: too large, empty, a length that overflows) is a
// *connect.Error, invalid_argument naming "body"; an error of the
// connection is returned as it is.
func (t *leanTransport) readFrame() (byte, []byte, error) {
	kind, payload, err := leanwire.ReadFrame(t.r, maxRequestBytes, &t.buf)
	switch {
	case err == nil:
		t.frames.Add(1)
	case errors.Is(err, leanwire.ErrTooLarge):
		err = tooLarge("")
	case errors.Is(err, leanwire.ErrEmpty):
		err = apierr.ToConnect(fence.Invalid("body", "a frame of length at least 1 (its kind byte)", "0"))
	case errors.Is(err, leanwire.ErrLengthOverflow):
		err = apierr.ToConnect(fence.Invalid("body", "a frame whose length is a uvarint of at most 10 bytes", ""))
	}
	return kind, payload, err
}

// Receive returns the next request, skipping pings. The client never
// half-closes: an end of the connection is the client gone (what it has
// in flight is cancelled, as for a stream reset).
func (t *leanTransport) Receive() (*fencev1.SessionRequest, error) {
	for {
		kind, payload, err := t.readFrame()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = connect.NewError(connect.CodeCanceled, errors.New("lean session connection closed by the client"))
			}
			return nil, err
		}
		switch kind {
		case leanwire.KindPing:
			if t.pongs {
				t.pong()
			}
			continue
		case leanwire.KindRequest:
			m := new(fencev1.SessionRequest)
			if err := proto.Unmarshal(payload, m); err != nil {
				return nil, apierr.ToConnect(fence.Invalid("body", "a SessionRequest (protobuf)", ""))
			}
			return m, nil
		default:
			return nil, apierr.ToConnect(fence.Invalid("kind", fmt.Sprintf("%d (a request) or %d (a ping)", leanwire.KindRequest, leanwire.KindPing), fmt.Sprint(kind)))
		}
	}
}

// Send buffers r: the sender flushes once the replies ready are sent.
func (t *leanTransport) Send(r *fencev1.SessionReply) error {
	var err error
	t.out, err = proto.MarshalOptions{}.MarshalAppend(t.out[:0], r)
	if err != nil {
		return err
	}
	t.wmu.Lock()
	defer t.wmu.Unlock()
	return leanwire.WriteFrame(t.w, leanwire.KindReply, t.out)
}

func (t *leanTransport) Flush() error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	return t.w.Flush()
}

// pong answers a ping (a client whose hello asked for pongs): the client
// learns the server is alive. A write that fails is the connection's, seen
// by the sender and the reader too.
func (t *leanTransport) pong() {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if leanwire.WriteFrame(t.w, leanwire.KindPong, nil) == nil {
		_ = t.w.Flush()
	}
}

// noReadDeadline lifts the deadline of the handshake and hello; from
// then on watchIdle bounds silence.
func (t *leanTransport) noReadDeadline() { _ = t.c.SetReadDeadline(time.Time{}) }

// writeWithin does nothing: a peer that does not read is cut by
// watchIdle (see the top of this file).
func (t *leanTransport) writeWithin(time.Duration) {}

// closeBody makes a Receive blocked on the connection return (a read
// deadline in the past), without closing it: the end frame that says why
// the stream ended is still to be written (serveLean).
func (t *leanTransport) closeBody() { _ = t.c.SetReadDeadline(time.Now()) }

// lingerAfterEnd bounds how long closeGracefully waits for the client to
// close its side after the end frame (net/http waits 500ms likewise
// before closing a connection whose request it did not read).
const lingerAfterEnd = 500 * time.Millisecond

// closeGracefully closes the sending side (the client reads the end frame,
// then EOF) and reads what the client still sends until it closes its
// side, for at most lingerAfterEnd, before the connection is closed: a
// close with unread bytes in the socket's buffer sends RST, which makes
// the client's kernel drop the end frame it has not yet read.
func (t *leanTransport) closeGracefully() {
	cw, ok := t.c.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	_ = t.c.SetReadDeadline(time.Now().Add(lingerAfterEnd))
	_, _ = io.Copy(io.Discard, t.c)
}

// watchIdle closes the connection once nothing arrived on it for t.idle.
func (t *leanTransport) watchIdle() (stop func()) {
	var (
		mu   sync.Mutex
		last = t.frames.Load()
		tm   *time.Timer
	)
	tm = time.AfterFunc(t.idle, func() {
		mu.Lock()
		defer mu.Unlock()
		n := t.frames.Load()
		if n == last {
			_ = t.c.Close()
			return
		}
		last = n
		tm.Reset(t.idle)
	})
	return func() {
		mu.Lock()
		tm.Stop()
		mu.Unlock()
	}
}

// end sends the frame that ends the stream: err's code, message and
// details (nil: the client ended it, nothing to say).
func (t *leanTransport) end(err error) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if err == nil {
		_ = t.w.Flush()
		return
	}
	ce := new(connect.Error)
	if !errors.As(err, &ce) {
		ce = connect.NewError(connect.CodeUnknown, err)
	}
	e := leanwire.End{Code: uint32(ce.Code()), Message: ce.Message()}
	for _, d := range ce.Details() {
		e.Details = append(e.Details, leanwire.Detail{Type: d.Type(), Value: d.Bytes()})
	}
	_ = t.c.SetWriteDeadline(time.Now().Add(t.writeTimeout))
	if leanwire.WriteFrame(t.w, leanwire.KindEnd, e.Append(nil)) == nil {
		_ = t.w.Flush()
	}
}
