package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/leanwire"
)

// WithLeanSessions carries the session's stream over the servers' lean
// session ports (fence serve --session-addr; api/leanwire) instead of
// SessionService.Stream over HTTP/2: the same requests, replies and
// guarantees (seq, ack, resends after a broken stream), with about 40% less of
// the server's CPU per request (docs/benchmarks.md). addrs are HOST:PORT,
// one per endpoint, in the order of the endpoints (New's URL list, then
// WithEndpoints). An https:// endpoint's lean port is reached over TLS
// with WithTLS's config; the bearer token of WithBearerToken is sent in
// the stream's hello. Every unary call (Open and Close of the session
// among them) stays on Connect.
func WithLeanSessions(addrs ...string) Option {
	return func(cfg *config) { cfg.leanAddrs = append(cfg.leanAddrs, addrs...) }
}

// sessionStream is one stream of the session: SessionService.Stream over
// Connect, or the lean port's (leanStream).
type sessionStream interface {
	Send(*fencev1.SessionRequest) error
	Receive() (*fencev1.SessionReply, error)
	// Flush writes what Send buffered (serve calls it after each batch).
	Flush() error
	// CloseRequest ends the stream: a Receive blocked on it returns.
	CloseRequest() error
}

// connectStream is SessionService.Stream: Connect sends each message as
// it comes.
type connectStream struct {
	*connect.BidiStreamForClient[fencev1.SessionRequest, fencev1.SessionReply]
}

func (connectStream) Flush() error { return nil }

// openStream opens the session's next stream on ep.
func (s *session) openStream(ctx context.Context, ep *endpoint) sessionStream {
	if ep.lean == "" {
		return connectStream{ep.sessions.Stream(ctx)}
	}
	return s.dialLean(ctx, ep)
}

// leanMaxReply bounds a reply frame the client reads (a Read reply
// carries a value of up to 1 MiB, base64 or not).
const leanMaxReply = 64 << 20

// leanStream is a session stream on a lean port: Send buffers, Flush
// writes what is buffered in one write; a ping goes out when nothing was
// sent for leanwire.PingEvery.
type leanStream struct {
	c   net.Conn
	err error // the dial's or the handshake's: every call fails with it
	r   *bufio.Reader
	buf []byte

	mu   sync.Mutex // w, out, sent
	w    *bufio.Writer
	out  []byte
	sent bool // something was written since the pinger last looked

	// every: the health check's period (streamPingEvery of the TTL);
	// pongs: the server answers pings (its first pong came); lastRecv:
	// when a frame last came (UnixNano).
	every    time.Duration
	pongs    atomic.Bool
	lastRecv atomic.Int64

	closeOnce sync.Once
	stop      chan struct{}
}

// dialLean connects to ep's lean port and sends the hello.
func (s *session) dialLean(ctx context.Context, ep *endpoint) sessionStream {
	st := &leanStream{stop: make(chan struct{}), every: streamPingEvery(s.c.cfg.sessionTTL)}
	dial := s.c.cfg.dialer
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	c, err := dial(ctx, "tcp", ep.lean)
	if err != nil {
		st.err = connect.NewError(connect.CodeUnavailable, err)
		return st
	}
	if strings.HasPrefix(ep.url, "https://") {
		cfg := &tls.Config{}
		if s.c.cfg.tls != nil {
			cfg = s.c.cfg.tls.Clone()
		}
		if cfg.ServerName == "" {
			host, _, _ := net.SplitHostPort(ep.lean)
			cfg.ServerName = host
		}
		cfg.NextProtos = nil
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			st.err = connect.NewError(connect.CodeUnavailable, err)
			return st
		}
		c = tc
	}
	st.c, st.r, st.w = c, bufio.NewReaderSize(c, leanwire.BufferSize), bufio.NewWriterSize(c, leanwire.BufferSize)
	h := leanwire.Hello{Version: leanwire.Version, Pongs: true}
	if a := s.c.cfg.headers.Get("Authorization"); a != "" {
		if scheme, secret, ok := strings.Cut(a, " "); ok && strings.EqualFold(scheme, "Bearer") {
			h.Token = strings.TrimSpace(secret)
		}
	}
	// The hello waits in the buffer for the first requests (one write).
	_ = leanwire.WriteFrame(st.w, leanwire.KindHello, h.Append(nil))
	stop := context.AfterFunc(ctx, func() { _ = st.CloseRequest() })
	go func() {
		<-st.stop
		stop()
	}()
	go st.ping()
	return st
}

func (st *leanStream) Send(m *fencev1.SessionRequest) error {
	if st.err != nil {
		return st.err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	var err error
	if st.out, err = (proto.MarshalOptions{}).MarshalAppend(st.out[:0], m); err != nil {
		return err
	}
	st.sent = true
	return leanErr(leanwire.WriteFrame(st.w, leanwire.KindRequest, st.out))
}

func (st *leanStream) Flush() error {
	if st.err != nil {
		return st.err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return leanErr(st.w.Flush())
}

// ping sends a ping whenever nothing was sent for leanwire.PingEvery, so
// that the server does not take the connection for dead. Against a server
// that answers pings (its first pong came) it is also the health check of
// the connection: when nothing was received for every, it pings, and when
// nothing comes for every after that ping either, it closes the
// connection: the server is stopped or cut off, and the session's stream
// moves to another endpoint (as HTTP/2's pings do for the Connect stream).
func (st *leanStream) ping() {
	t := time.NewTicker(st.every)
	defer t.Stop()
	lastPing := time.Now() // for the server's idle rule
	var probe time.Time    // the health ping in flight, if any
	for {
		select {
		case <-st.stop:
			return
		case now := <-t.C:
			recv := time.Unix(0, st.lastRecv.Load())
			if st.pongs.Load() {
				switch {
				case !probe.IsZero() && recv.Before(probe) && now.Sub(probe) >= st.every:
					_ = st.CloseRequest() // no answer: the server is gone
					return
				case !probe.IsZero() && !recv.Before(probe):
					probe = time.Time{} // answered
				}
			}
			st.mu.Lock()
			send := false
			if now.Sub(lastPing) >= leanwire.PingEvery {
				send = !st.sent
				st.sent = false
				lastPing = now
			}
			if st.pongs.Load() && probe.IsZero() && now.Sub(recv) >= st.every {
				send, probe = true, now
			}
			if send && leanwire.WriteFrame(st.w, leanwire.KindPing, nil) == nil {
				_ = st.w.Flush()
			}
			st.mu.Unlock()
		}
	}
}

// Receive returns the next reply, or the error the stream ended with:
// the server's, as its end frame says it, or the connection's.
func (st *leanStream) Receive() (*fencev1.SessionReply, error) {
	if st.err != nil {
		return nil, st.err
	}
	kind, payload, err := leanwire.ReadFrame(st.r, leanMaxReply, &st.buf)
	for err == nil && kind == leanwire.KindPong {
		st.lastRecv.Store(time.Now().UnixNano())
		st.pongs.Store(true)
		kind, payload, err = leanwire.ReadFrame(st.r, leanMaxReply, &st.buf)
	}
	if err != nil {
		return nil, leanErr(err)
	}
	st.lastRecv.Store(time.Now().UnixNano())
	switch kind {
	case leanwire.KindReply:
		r := new(fencev1.SessionReply)
		if err := proto.Unmarshal(payload, r); err != nil {
			return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("fence: lean session stream: unreadable reply: %w", err))
		}
		return r, nil
	case leanwire.KindEnd:
		e, err := leanwire.ParseEnd(payload)
		if err != nil {
			return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("fence: lean session stream: unreadable end frame: %w", err))
		}
		ce := connect.NewError(connect.Code(e.Code), errors.New(e.Message))
		for _, d := range e.Details {
			if det, err := connect.NewErrorDetail(&anypb.Any{TypeUrl: "type.googleapis.com/" + d.Type, Value: d.Value}); err == nil {
				ce.AddDetail(det)
			}
		}
		return nil, ce
	default:
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("fence: lean session stream: frame kind %d where a reply (%d) or an end (%d) was expected", kind, leanwire.KindReply, leanwire.KindEnd))
	}
}

// leanErr is a broken connection's error as Connect would give it:
// Unavailable, the cause kept (EOF, a net.OpError: not an answer).
func leanErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return connect.NewError(connect.CodeUnavailable, err)
}

func (st *leanStream) CloseRequest() error {
	st.closeOnce.Do(func() {
		close(st.stop)
		if st.c != nil {
			_ = st.c.Close()
		}
	})
	return nil
}
