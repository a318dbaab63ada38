package client_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/api/leanwire"
	"github.com/fenceworks/fence/client"
	"github.com/fenceworks/fence/daemon"
)

// leanServer runs a real server of the test's own with its API on one
// loopback port and its lean session port on another; it returns the
// API's URL and the lean port's address.
func leanServer(t *testing.T) (url, lean string) {
	t.Helper()
	d, err := daemon.New(daemon.Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, sln := listenLoopback(t), listenLoopback(t)
	served := make(chan error, 2)
	go func() { served <- d.Serve(ln) }()
	go func() { served <- d.ServeSessions(sln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = d.Shutdown(ctx)
		<-served
		<-served
	})
	return "http://" + ln.Addr().String(), sln.Addr().String()
}

// TestLeanSessionServesTheSessionOps: a session over the lean port takes,
// writes with, renews and releases leases, and its leases are the
// server's (seen by a Connect client).
func TestLeanSessionServesTheSessionOps(t *testing.T) {
	url, lean := leanServer(t)
	ctx, name := ctxFor(t), uniq(t)
	c := newClientFor(t, url, client.WithLeanSessions(lean))
	other := newClientFor(t, url, client.WithoutSession())
	leases := make([]*client.Lease, 20) // in flight at once: each reply must reach its own call
	var wg sync.WaitGroup
	errs := make(chan error, len(leases))
	for i := range leases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Acquire(ctx, name+"-"+string(rune('a'+i)))
			if err != nil {
				errs <- err
				return
			}
			leases[i] = l
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, l := range leases {
		n := name + "-" + string(rune('a'+i))
		if l.Name() != n {
			t.Fatalf("lease %d is for %q, asked for %q (a reply reached the wrong call)", i, l.Name(), n)
		}
		info, err := other.Get(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if info.Lease == nil || info.Lease.Token != l.Token() {
			t.Fatalf("lock %s: lease %+v, want the lean session's token %d", n, info.Lease, l.Token())
		}
	}
	if err := leases[0].Renew(ctx); err != nil {
		t.Fatalf("renew over the lean port: %v", err)
	}
	// A refusal comes back typed: the lock is held.
	if _, err := other.Acquire(ctx, leases[1].Name(), client.TTL(time.Minute)); !errors.Is(err, fence.ErrBusy) {
		t.Fatalf("acquire of a held lock: %v, want busy", err)
	}
	for _, l := range leases {
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release over the lean port: %v", err)
		}
	}
	info, err := other.Get(ctx, leases[0].Name())
	if err != nil {
		t.Fatal(err)
	}
	if info.Lease != nil {
		t.Fatalf("lock %s still held after release: %+v", leases[0].Name(), info.Lease)
	}
}

// leanTap is a TCP proxy in front of a lean port that reads the frames:
// it records every request with the number of the connection it came on,
// and drops the reply to the first request rule picks.
type leanTap struct {
	target string
	ln     net.Listener

	mu      sync.Mutex
	conns   []net.Conn
	accepts int
	reqs    []tapped
	pick    func(*fencev1.SessionRequest) bool
	dropped *tapped // the request whose reply was dropped
	replies map[[2]uint64]*fencev1.SessionReply
	changed chan struct{}
}

type tapped struct {
	conn int
	msg  *fencev1.SessionRequest
}

func newLeanTap(t *testing.T, target string) *leanTap {
	tp := &leanTap{target: target, ln: listenLoopback(t), replies: map[[2]uint64]*fencev1.SessionReply{}, changed: make(chan struct{})}
	t.Cleanup(func() { tp.ln.Close(); tp.cut() })
	go func() {
		for {
			c, err := tp.ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			tp.mu.Lock()
			tp.accepts++
			n := tp.accepts
			tp.conns = append(tp.conns, c, s)
			tp.mu.Unlock()
			go tp.pump(n, s, c, false)
			go tp.pump(n, c, s, true)
		}
	}()
	return tp
}

func (tp *leanTap) addr() string { return tp.ln.Addr().String() }

func (tp *leanTap) notify() {
	close(tp.changed)
	tp.changed = make(chan struct{})
}

// pump copies frames from src to dst; fromServer: src is the server.
func (tp *leanTap) pump(conn int, dst, src net.Conn, fromServer bool) {
	defer dst.Close()
	defer src.Close()
	r, w := bufio.NewReader(src), bufio.NewWriter(dst)
	var buf []byte
	for {
		kind, payload, err := leanwire.ReadFrame(r, 64<<20, &buf)
		if err != nil {
			return
		}
		drop := false
		tp.mu.Lock()
		switch {
		case fromServer && kind == leanwire.KindReply:
			m := new(fencev1.SessionReply)
			_ = proto.Unmarshal(payload, m)
			for i := len(tp.reqs) - 1; i >= 0; i-- {
				q := tp.reqs[i]
				if q.conn == conn && q.msg.GetCall() == m.GetCall() {
					tp.replies[[2]uint64{uint64(conn), m.GetCall()}] = m
					if tp.dropped == nil && tp.pick != nil && tp.pick(q.msg) {
						tp.dropped, drop = &q, true
					}
					break
				}
			}
			tp.notify()
		case !fromServer && kind == leanwire.KindRequest:
			m := new(fencev1.SessionRequest)
			_ = proto.Unmarshal(payload, m)
			tp.reqs = append(tp.reqs, tapped{conn, m})
			tp.notify()
		}
		tp.mu.Unlock()
		if drop {
			continue
		}
		if leanwire.WriteFrame(w, kind, payload) != nil || w.Flush() != nil {
			return
		}
	}
}

func (tp *leanTap) cut() {
	tp.mu.Lock()
	conns := tp.conns
	tp.conns = nil
	tp.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// wait waits until cond (called with tp.mu held) holds.
func (tp *leanTap) wait(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for {
		tp.mu.Lock()
		ok, ch := cond(), tp.changed
		tp.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}

// TestLeanResendKeepsSeq: over the lean port, an acquire whose reply is
// lost with its connection is resent on the next connection with the
// same seq and answered with the saved grant (exactly once), and a
// release likewise.
func TestLeanResendKeepsSeq(t *testing.T) {
	url, lean := leanServer(t)
	ctx, name := ctxFor(t), uniq(t)
	tp := newLeanTap(t, lean)
	c := newClientFor(t, url, client.WithLeanSessions(tp.addr()), client.WithBackoff(10*time.Millisecond, 100*time.Millisecond))
	other := newClientFor(t, url, client.WithoutSession())
	var l *client.Lease // acquired by the first round, released by the second
	for _, op := range []string{"acquire", "release"} {
		tp.mu.Lock()
		tp.dropped = nil
		tp.pick = func(m *fencev1.SessionRequest) bool {
			return m.GetAcquire().GetName() == name && op == "acquire" || m.GetRelease().GetName() == name && op == "release"
		}
		tp.mu.Unlock()
		done := make(chan error, 1)
		go func() {
			if op == "acquire" {
				var err error
				l, err = c.Acquire(ctx, name)
				done <- err
				return
			}
			done <- l.Release(ctx)
		}()
		var first tapped
		tp.wait(t, ctx, op+"'s reply, dropped", func() bool {
			if tp.dropped != nil {
				first = *tp.dropped
			}
			return tp.dropped != nil
		})
		tp.cut()
		if err := <-done; err != nil {
			tp.mu.Lock()
			for _, q := range tp.reqs {
				t.Logf("conn %d req %v reply %v", q.conn, q.msg, tp.replies[[2]uint64{uint64(q.conn), q.msg.GetCall()}])
			}
			tp.mu.Unlock()
			t.Fatalf("%s across the dropped connection: %v (applied twice?)", op, err)
		}
		tp.mu.Lock()
		var resent *tapped
		for i := range tp.reqs {
			if q := tp.reqs[i]; q.conn > first.conn && tp.pick(q.msg) {
				resent = &q
				break
			}
		}
		var reply *fencev1.SessionReply
		if resent != nil {
			reply = tp.replies[[2]uint64{uint64(resent.conn), resent.msg.GetCall()}]
		}
		tp.mu.Unlock()
		if resent == nil {
			t.Fatalf("%s: not resent on a new connection", op)
		}
		if resent.msg.GetSeq() != first.msg.GetSeq() {
			t.Fatalf("%s resent with seq %d, first sent with %d (exactly once needs the same seq)", op, resent.msg.GetSeq(), first.msg.GetSeq())
		}
		if !reply.GetReplayed() {
			t.Fatalf("%s's resend answered %v, want replayed (the saved result)", op, reply)
		}
		info, err := other.Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if op == "acquire" && (info.Lease == nil || info.Lease.Token != l.Token() || info.LastToken != l.Token()) {
			t.Fatalf("lock %+v (lease %+v): want held by token %d, its only grant", info, info.Lease, l.Token())
		}
		if op == "release" && (info.Lease != nil || info.LastToken != l.Token()) {
			t.Fatalf("lock %+v (lease %+v): want free, last token %d", info, info.Lease, l.Token())
		}
	}
	// The acknowledgements travel too: once the resent calls are
	// answered, a later request acknowledges their seqs, so the server
	// forgets their saved results. A keepalive is a later request.
	var top uint64
	tp.mu.Lock()
	for _, q := range tp.reqs {
		top = max(top, q.msg.GetSeq())
	}
	tp.mu.Unlock()
	if _, err := c.Acquire(ctx, name+"-after"); err != nil {
		t.Fatal(err)
	}
	tp.wait(t, ctx, "a request acknowledging every answered seq", func() bool {
		for _, q := range tp.reqs {
			if q.msg.GetAck() > top {
				return true
			}
		}
		return false
	})
}

// TestLeanSessionExpiryLosesLeases: a lean session whose connection goes
// silent (no keepalive gets through) loses its leases in the client, and
// the server ends the session: the lock is free for others.
func TestLeanSessionExpiryLosesLeases(t *testing.T) {
	url, lean := leanServer(t)
	ctx, name := ctxFor(t), uniq(t)
	proxy, _ := newTCPProxy(t, "http://"+lean)
	proxyAddr := proxy.ln.Addr().String()
	c := newClientFor(t, url, client.WithLeanSessions(proxyAddr), client.WithSessionTTL(time.Second))
	l, err := c.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	proxy.setPaused(true)
	waitDone(t, ctx, l)
	if err := leaseCause(l); !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("lease ended with %v, want ErrLeaseLost", err)
	}
	other := newClientFor(t, url, client.WithoutSession())
	l2, err := other.Acquire(ctx, name, client.TTL(time.Minute), client.Wait(20*time.Second))
	if err != nil {
		t.Fatalf("the expired session's lock was not freed: %v", err)
	}
	if l2.Token() <= l.Token() {
		t.Fatalf("new token %d not above the lost one %d", l2.Token(), l.Token())
	}
	l2.Release(ctx)
}

// leanDial opens a raw lean connection and sends a hello with token.
func leanDial(t *testing.T, addr, token string) (net.Conn, *bufio.Reader, *bufio.Writer) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	w := bufio.NewWriter(c)
	if err := leanwire.WriteFrame(w, leanwire.KindHello, leanwire.Hello{Version: leanwire.Version, Token: token}.Append(nil)); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c), w
}

// leanEnd reads frames until the end frame and returns its error.
func leanEnd(t *testing.T, r *bufio.Reader) *connect.Error {
	t.Helper()
	var buf []byte
	for {
		kind, payload, err := leanwire.ReadFrame(r, 64<<20, &buf)
		if err != nil {
			t.Fatalf("no end frame: %v", err)
		}
		if kind != leanwire.KindEnd {
			continue
		}
		e, err := leanwire.ParseEnd(payload)
		if err != nil {
			t.Fatal(err)
		}
		ce := connect.NewError(connect.Code(e.Code), errors.New(e.Message))
		for _, d := range e.Details {
			det, err := connect.NewErrorDetail(&anypb.Any{TypeUrl: "type.googleapis.com/" + d.Type, Value: d.Value})
			if err != nil {
				t.Fatal(err)
			}
			ce.AddDetail(det)
		}
		return ce
	}
}

// TestLeanFrameOverTheBoundRefused: a frame announcing more than a
// request's bound (4 MiB) ends the stream with INVALID_ARGUMENT naming
// the body, before its payload is sent.
func TestLeanFrameOverTheBoundRefused(t *testing.T) {
	_, lean := leanServer(t)
	_, r, w := leanDial(t, lean, "")
	var hdr []byte
	hdr = append(hdr, 0x80|0x01, 0x80, 0x80, 0x03) // uvarint 6 MiB + 1
	if _, err := w.Write(append(hdr, leanwire.KindRequest)); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	ce := leanEnd(t, r)
	if ce.Code() != connect.CodeInvalidArgument {
		t.Fatalf("oversized frame ended the stream with %v, want invalid_argument", ce)
	}
	var inv *fence.InvalidError
	if err := apierr.FromConnect(ce); !errors.As(err, &inv) || inv.Field != "body" {
		t.Fatalf("refusal %v, want a typed InvalidError naming body", err)
	}
}

// TestLeanAuth: with authentication on, a lean stream without a token or
// with a wrong one is refused UNAUTHENTICATED (the end frame, typed); the
// client with its principal's token acquires over the lean port.
func TestLeanAuth(t *testing.T) {
	url, lean := leanServer(t)
	ctx := ctxFor(t)
	auth := fencev1connect.NewAuthServiceClient(http.DefaultClient, url)
	boot, err := auth.Bootstrap(ctx, connect.NewRequest(&fencev1.AuthBootstrapRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	admin := boot.Msg.GetSecret()
	if _, err := auth.SetEnabled(ctx, bearerReq(&fencev1.AuthSetEnabledRequest{Enabled: true}, admin)); err != nil {
		t.Fatal(err)
	}
	for _, token := range []string{"", "fence_not-a-token"} {
		_, r, w := leanDial(t, lean, token)
		m, _ := proto.Marshal(&fencev1.SessionRequest{Session: 1, Call: 1, Op: &fencev1.SessionRequest_KeepAlive{KeepAlive: &fencev1.KeepAliveRequest{}}})
		_ = leanwire.WriteFrame(w, leanwire.KindRequest, m)
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		ce := leanEnd(t, r)
		if err := apierr.FromConnect(ce); !errors.Is(err, fence.ErrUnauthenticated) {
			t.Fatalf("token %q: stream ended with %v, want UNAUTHENTICATED", token, ce)
		}
	}
	c := newClientFor(t, url, client.WithLeanSessions(lean), client.WithBearerToken(admin))
	l, err := c.Acquire(ctx, "x")
	if err != nil {
		t.Fatalf("acquire with the admin's token over the lean port: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
