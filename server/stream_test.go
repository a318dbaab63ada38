package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/state"
)

// sessionClients are the SessionService clients of each protocol that can
// carry a bidi stream (HTTP/2 without TLS).
func sessionClients(url string) []struct {
	name string
	c    fencev1connect.SessionServiceClient
} {
	h2 := h2cClient()
	return []struct {
		name string
		c    fencev1connect.SessionServiceClient
	}{
		{"grpc", fencev1connect.NewSessionServiceClient(h2, url, connect.WithGRPC())},
		{"connect-json", fencev1connect.NewSessionServiceClient(h2, url, connect.WithProtoJSON())},
	}
}

// openSession opens a session with ttl and returns its id.
func openSession(t *testing.T, c fencev1connect.SessionServiceClient, ttl time.Duration) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	r, err := c.Open(ctx, connect.NewRequest(&fencev1.OpenSessionRequest{Ttl: durationpb.New(ttl)}))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if r.Msg.Session.GetId() == 0 || r.Msg.Session.GetTtl().AsDuration() != ttl {
		t.Fatalf("Open = %v, want an id and ttl %s", r.Msg.Session, ttl)
	}
	return r.Msg.Session.GetId()
}

// testStream is one SessionService.Stream from the client's side: what it
// receives is queued on replies, and its end (the error Receive returned)
// on end.
type testStream struct {
	t       *testing.T
	s       *connect.BidiStreamForClient[fencev1.SessionRequest, fencev1.SessionReply]
	cancel  context.CancelFunc
	replies chan *fencev1.SessionReply
	end     chan error
}

// startStream opens a stream and sends first.
func startStream(t *testing.T, c fencev1connect.SessionServiceClient, first *fencev1.SessionRequest) *testStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testStream{t: t, s: c.Stream(ctx), cancel: cancel, replies: make(chan *fencev1.SessionReply, 1024), end: make(chan error, 1)}
	// A stream the server refuses at once (over MaxStreams) may fail
	// this send; its end tells why.
	_ = ts.s.Send(first)
	go func() {
		for {
			r, err := ts.s.Receive()
			if err != nil {
				ts.end <- err
				return
			}
			ts.replies <- r
		}
	}()
	t.Cleanup(func() {
		ts.drop()
		select {
		case <-ts.end:
		case <-time.After(hangGuard):
			t.Error("stream's Receive never returned after cancel")
		}
	})
	return ts
}

// drop ends the stream from the client's side as a client that goes away
// does: its context ends and the stream is reset. (Cancelling the context
// alone does not reset a stream whose reply headers have come while its
// request side is open: net/http's HTTP/2 transport notices the cancel
// only once the request body ends. Closing the response resets it.)
func (ts *testStream) drop() {
	ts.cancel()
	_ = ts.s.CloseResponse()
}

func (ts *testStream) send(m *fencev1.SessionRequest) {
	ts.t.Helper()
	if err := ts.s.Send(m); err != nil {
		ts.t.Fatalf("Send(%v): %v", m, err)
	}
}

// next returns the next reply; the stream's end fails the test.
func (ts *testStream) next() *fencev1.SessionReply {
	ts.t.Helper()
	select {
	case r := <-ts.replies:
		return r
	case err := <-ts.end:
		ts.end <- err
		ts.t.Fatalf("stream ended waiting for a reply: %v", err)
	case <-time.After(hangGuard):
		ts.t.Fatalf("no reply within %s", hangGuard)
	}
	return nil
}

// ended returns the error the stream ended with (the Receive that failed).
func (ts *testStream) ended() error {
	ts.t.Helper()
	select {
	case r := <-ts.replies:
		ts.t.Fatalf("reply %v, want the stream to end", r)
	case err := <-ts.end:
		ts.end <- err
		return err
	case <-time.After(hangGuard):
		ts.t.Fatalf("stream did not end within %s", hangGuard)
	}
	return nil
}

// call sends m and returns its reply (no other request may be in flight).
func (ts *testStream) call(m *fencev1.SessionRequest) *fencev1.SessionReply {
	ts.t.Helper()
	ts.send(m)
	r := ts.next()
	if r.GetCall() != m.GetCall() {
		ts.t.Fatalf("reply to call %d, want %d: %v", r.GetCall(), m.GetCall(), r)
	}
	return r
}

// refusedWith checks r is a refusal whose reason is reason and returns the
// typed refusal.
func refusedWith(t *testing.T, r *fencev1.SessionReply, reason fence.Reason) error {
	t.Helper()
	d := r.GetError()
	if d == nil || d.GetReason() != string(reason) || r.GetMessage() == "" {
		t.Fatalf("reply %v, want a %s refusal with a message", r, reason)
	}
	return apierr.FromDetail(d)
}

// lockOf reads lock name through LockService.Get.
func lockOf(t *testing.T, url, name string) *fencev1.LockInfo {
	t.Helper()
	g, err := protocols(url)[1].locks.Get(context.Background(), connect.NewRequest(&fencev1.GetRequest{Name: name}))
	if err != nil {
		t.Fatal(err)
	}
	return g.Msg.Lock
}

// until polls cond, bounded by hangGuard.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, hangGuard)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func acquireOp(name, owner string, wait time.Duration) *fencev1.SessionRequest_Acquire {
	a := &fencev1.AcquireRequest{Name: name, Owner: owner}
	if wait > 0 {
		a.Wait = durationpb.New(wait)
	}
	return &fencev1.SessionRequest_Acquire{Acquire: a}
}

// The story on a stream, through gRPC and Connect JSON: open a
// session, acquire on it (no ttl: the session's), write fenced with its
// token, close the session: the lock is free at once, and the stream's
// next request is SESSION_EXPIRED.
func TestStreamSessionFlow(t *testing.T) {
	_, url := startServer(t)
	for _, sc := range sessionClients(url) {
		t.Run(sc.name, func(t *testing.T) {
			lock, res := "flow-"+sc.name, "flow-r-"+sc.name
			id := openSession(t, sc.c, time.Minute)
			ts := startStream(t, sc.c, &fencev1.SessionRequest{Session: id})
			a := ts.call(&fencev1.SessionRequest{Call: 1, Seq: 1, Ack: 1, Op: acquireOp(lock, "me", 0)})
			l := a.GetAcquire().GetLease()
			if l.GetToken() == 0 || l.GetOwner() != "me" || l.GetTtl().AsDuration() != time.Minute || a.GetReplayed() {
				t.Fatalf("acquire on the session = %v, want a lease with the session's ttl", a)
			}
			w := ts.call(&fencev1.SessionRequest{Call: 2, Seq: 2, Ack: 2, Op: &fencev1.SessionRequest_Write{
				Write: &fencev1.WriteRequest{Resource: res, Token: l.GetToken(), Value: []byte("v1")}}})
			if w.GetWrite().GetState().GetLastToken() != l.GetToken() || string(w.GetWrite().GetState().GetValue()) != "v1" {
				t.Fatalf("fenced write = %v", w)
			}
			rd := ts.call(&fencev1.SessionRequest{Call: 3, Op: &fencev1.SessionRequest_Read{Read: &fencev1.ReadRequest{Resource: res}}})
			if string(rd.GetRead().GetState().GetValue()) != "v1" {
				t.Fatalf("read = %v", rd)
			}
			g := ts.call(&fencev1.SessionRequest{Call: 4, Op: &fencev1.SessionRequest_Get{Get: &fencev1.GetRequest{Name: lock}}})
			if g.GetGet().GetLock().GetLease().GetToken() != l.GetToken() {
				t.Fatalf("get = %v", g)
			}
			if _, err := sc.c.Close(context.Background(), connect.NewRequest(&fencev1.CloseSessionRequest{Session: id})); err != nil {
				t.Fatal(err)
			}
			if li := lockOf(t, url, lock); li.GetLease() != nil {
				t.Fatalf("lock after the session closed = %v, want free", li)
			}
			r := ts.call(&fencev1.SessionRequest{Call: 5, Seq: 3, Ack: 3, Op: acquireOp(lock, "me", 0)})
			var ended *fence.SessionExpiredError
			if err := refusedWith(t, r, fence.ReasonSessionExpired); !errors.As(err, &ended) || ended.Session != id {
				t.Fatalf("acquire after close = %v, want SESSION_EXPIRED naming session %d", r, id)
			}
			// The client closes its side: the stream ends cleanly.
			if err := ts.s.CloseRequest(); err != nil {
				t.Fatal(err)
			}
			if err := ts.ended(); !errors.Is(err, io.EOF) {
				t.Fatalf("stream after CloseRequest ended with %v, want EOF", err)
			}
		})
	}
}

// A blocking acquire on a stream holds back no other reply: a keepalive
// and an add sent after it are answered while it waits, and it is granted
// when the holder lets go.
func TestStreamBlockingAcquireDoesNotDelayOthers(t *testing.T) {
	_, url := startServer(t)
	c := sessionClients(url)[0].c
	ctx := context.Background()
	locks := protocols(url)[1].locks
	held, err := locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "busy", Owner: "other", Ttl: durationpb.New(time.Hour)}))
	if err != nil {
		t.Fatal(err)
	}
	id := openSession(t, c, time.Minute)
	ts := startStream(t, c, &fencev1.SessionRequest{Session: id, Call: 1, Seq: 1, Ack: 1, Op: acquireOp("busy", "me", time.Hour)})
	ts.send(&fencev1.SessionRequest{Call: 2, Seq: 2, Ack: 1, Op: &fencev1.SessionRequest_KeepAlive{KeepAlive: &fencev1.KeepAliveRequest{}}})
	if r := ts.next(); r.GetCall() != 2 || r.GetKeepAlive().GetSession().GetId() != id {
		t.Fatalf("first reply = %v, want the keepalive (call 2) while the acquire waits", r)
	}
	// Requests on a stream run concurrently: the keepalive's reply may come
	// before the acquire (call 1) is even proposed, so wait for it to queue.
	until(t, "the stream's acquire queued behind the holder", func() bool { return lockOf(t, url, "busy").GetWaiters() == 1 })
	if _, err := locks.Release(ctx, connect.NewRequest(&fencev1.ReleaseRequest{Name: "busy", Token: held.Msg.Lease.Token})); err != nil {
		t.Fatal(err)
	}
	if r := ts.next(); r.GetCall() != 1 || r.GetAcquire().GetLease().GetToken() <= held.Msg.Lease.Token {
		t.Fatalf("reply = %v, want the acquire (call 1) granted after the release", r)
	}
}

// A session that has ended is SESSION_EXPIRED everywhere: a new stream for
// it ends at once with failed_precondition, a unary session-bound call and
// a keepalive are refused. Both ends: Close, and the TTL running out.
func TestSessionExpiredOnStreamAndUnary(t *testing.T) {
	_, url := startServer(t)
	c := sessionClients(url)[0].c
	ctx := context.Background()
	locks := protocols(url)[1].locks
	closed := openSession(t, c, time.Minute)
	if _, err := c.Close(ctx, connect.NewRequest(&fencev1.CloseSessionRequest{Session: closed})); err != nil {
		t.Fatal(err)
	}
	// The expiring session holds a lock; its TTL is cut to the smallest
	// by a keepalive. Nothing touches it after that: another client's
	// blocking acquire of its lock is granted when it expires (the
	// server's own proof), and only then is it probed. (Probing it with
	// keepalives until one is refused keeps it alive whenever each
	// keepalive comes within 10ms of the last one.)
	expired := openSession(t, c, time.Minute)
	held, err := locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "expiring", Owner: "session", Session: &fencev1.SessionRef{Id: expired}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.KeepAlive(ctx, connect.NewRequest(&fencev1.KeepAliveRequest{Session: expired, Ttl: durationpb.New(fence.MinTTL)})); err != nil {
		t.Fatal(err)
	}
	next, err := locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "expiring", Owner: "next", Ttl: durationpb.New(time.Hour), Wait: durationpb.New(time.Minute)}))
	if err != nil || next.Msg.GetLease().GetOwner() != "next" || next.Msg.GetLease().GetToken() <= held.Msg.GetLease().GetToken() {
		t.Fatalf("blocking acquire of the expiring session's lock = %v, %v; want granted once the session expired", next, err)
	}
	for _, id := range []uint64{closed, expired} {
		wantExpired := func(what string, err error) {
			t.Helper()
			var se *fence.SessionExpiredError
			if connect.CodeOf(err) != connect.CodeFailedPrecondition || !errors.As(apierr.FromConnect(err), &se) || se.Session != id {
				t.Fatalf("%s on ended session %d = %v, want failed_precondition SESSION_EXPIRED naming it", what, id, err)
			}
		}
		ts := startStream(t, c, &fencev1.SessionRequest{Session: id})
		wantExpired("stream", ts.ended())
		_, err := c.KeepAlive(ctx, connect.NewRequest(&fencev1.KeepAliveRequest{Session: id}))
		wantExpired("keepalive", err)
		_, err = c.Close(ctx, connect.NewRequest(&fencev1.CloseSessionRequest{Session: id}))
		wantExpired("close", err)
		for _, pc := range protocols(url) {
			_, err = pc.locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "x", Session: &fencev1.SessionRef{Id: id, Seq: 1}}))
			wantExpired(pc.name+" acquire", err)
		}
	}
}

// A seq retried on a new stream (the first one broke before its reply
// came) gets the saved result, replayed, and is applied once.
func TestStreamRetriedSeqAppliesOnce(t *testing.T) {
	_, url := startServer(t)
	c := sessionClients(url)[0].c
	id := openSession(t, c, time.Minute)
	first := startStream(t, c, &fencev1.SessionRequest{Session: id})
	a := first.call(&fencev1.SessionRequest{Call: 1, Seq: 1, Ack: 1, Op: acquireOp("counter-lock", "me", 0)})
	tok := a.GetAcquire().GetLease().GetToken()
	add := &fencev1.SessionRequest{Call: 2, Seq: 2, Ack: 2, Op: &fencev1.SessionRequest_Add{Add: &fencev1.AddRequest{Resource: "counter", Token: tok, Delta: 5}}}
	r := first.call(add)
	if r.GetAdd().GetValue() != 5 || r.GetReplayed() {
		t.Fatalf("add = %v, want 5, not replayed", r)
	}
	first.drop() // the stream breaks; the client resends seq 2 on a new one
	if err := first.ended(); connect.CodeOf(err) != connect.CodeCanceled {
		t.Fatalf("cancelled stream ended with %v", err)
	}
	second := startStream(t, c, &fencev1.SessionRequest{Session: id})
	add.Call = 7
	r = second.call(add)
	if r.GetAdd().GetValue() != 5 || !r.GetReplayed() || !r.GetAdd().GetReplayed() {
		t.Fatalf("retried add = %v, want the saved 5, replayed", r)
	}
	rd := second.call(&fencev1.SessionRequest{Call: 8, Op: &fencev1.SessionRequest_Read{Read: &fencev1.ReadRequest{Resource: "counter"}}})
	if v := rd.GetRead().GetState().GetVersion(); v != 1 {
		t.Fatalf("counter version = %d (%v), want 1: the add applied once", v, rd)
	}
	// The lease lives on with the session across streams.
	if li := lockOf(t, url, "counter-lock"); li.GetLease().GetToken() != tok {
		t.Fatalf("lock = %v, want still held with token %d", li, tok)
	}
}

// A first message that names no session ends the stream with
// invalid_argument naming "session"; later messages are checked like unary
// requests and refused one by one, the stream serving on.
func TestStreamBadMessages(t *testing.T) {
	_, url := startServer(t)
	for _, sc := range sessionClients(url) {
		t.Run(sc.name, func(t *testing.T) {
			ts := startStream(t, sc.c, &fencev1.SessionRequest{Call: 1, Op: acquireOp("x", "me", 0)})
			checkInvalid(t, ts.ended(), "session")

			id := openSession(t, sc.c, time.Minute)
			ts = startStream(t, sc.c, &fencev1.SessionRequest{Session: id})
			for _, tc := range []struct {
				m     *fencev1.SessionRequest
				field string
			}{
				{&fencev1.SessionRequest{Call: 1}, "op"},
				{&fencev1.SessionRequest{Call: 2, Op: acquireOp("", "me", 0)}, "name"},
				{&fencev1.SessionRequest{Call: 3, Op: &fencev1.SessionRequest_Acquire{Acquire: &fencev1.AcquireRequest{Name: "x", Ttl: durationpb.New(time.Millisecond)}}}, "ttl"},
				{&fencev1.SessionRequest{Call: 4, Seq: 3, Ack: 4, Op: acquireOp("x", "me", 0)}, "ack"},
				{&fencev1.SessionRequest{Call: 5, Session: id + 1, Op: acquireOp("x", "me", 0)}, "session"},
				{&fencev1.SessionRequest{Call: 6, Op: &fencev1.SessionRequest_Write{Write: &fencev1.WriteRequest{Resource: "r", Token: 0}}}, "token"},
				{&fencev1.SessionRequest{Call: 7, Op: &fencev1.SessionRequest_KeepAlive{KeepAlive: &fencev1.KeepAliveRequest{Ttl: durationpb.New(25 * time.Hour)}}}, "ttl"},
				{&fencev1.SessionRequest{Call: 8, Op: &fencev1.SessionRequest_Read{Read: &fencev1.ReadRequest{}}}, "resource"},
				// Lock boundaries (issue 23): a mode string only the wire
				// can carry, a set's lock's mode, a name twice.
				{&fencev1.SessionRequest{Call: 10, Op: &fencev1.SessionRequest_Acquire{Acquire: &fencev1.AcquireRequest{Name: "x", Mode: "read"}}}, "mode"},
				{&fencev1.SessionRequest{Call: 11, Op: &fencev1.SessionRequest_Acquire{Acquire: &fencev1.AcquireRequest{
					Locks: []*fencev1.LockSpec{{Name: "a"}, {Name: "b", Mode: "x"}}}}}, "locks[1].mode"},
				{&fencev1.SessionRequest{Call: 12, Op: &fencev1.SessionRequest_Acquire{Acquire: &fencev1.AcquireRequest{
					Locks: []*fencev1.LockSpec{{Name: "a"}, {Name: "a"}}}}}, "locks[1].name"},
				{&fencev1.SessionRequest{Call: 13, Op: &fencev1.SessionRequest_Acquire{Acquire: &fencev1.AcquireRequest{Name: "x", Permits: 2000}}}, "permits"},
			} {
				r := ts.call(tc.m)
				var inv *fence.InvalidError
				if err := refusedWith(t, r, fence.ReasonInvalid); !errors.As(err, &inv) || inv.Field != tc.field || inv.Bound == "" {
					t.Fatalf("%v: reply %v, want INVALID_ARGUMENT naming %q with a bound", tc.m, r, tc.field)
				}
			}
			// Still serving.
			if r := ts.call(&fencev1.SessionRequest{Call: 9, Seq: 1, Ack: 1, Op: acquireOp("ok-"+sc.name, "me", 0)}); r.GetAcquire() == nil {
				t.Fatalf("acquire after bad messages = %v", r)
			}
		})
	}
}

// A stream dropped while its acquire waits: the wait is withdrawn from the
// queue (the lock is not handed to nobody when its holder lets go), and
// the session lives on.
func TestStreamDroppedMidWaitWithdrawsTheWait(t *testing.T) {
	s, url := startServer(t)
	c := sessionClients(url)[0].c
	ctx := context.Background()
	locks := protocols(url)[1].locks
	held, err := locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "w", Owner: "other", Ttl: durationpb.New(time.Hour)}))
	if err != nil {
		t.Fatal(err)
	}
	id := openSession(t, c, time.Minute)
	ts := startStream(t, c, &fencev1.SessionRequest{Session: id, Call: 1, Seq: 1, Ack: 1, Op: acquireOp("w", "me", time.Hour)})
	until(t, "the stream's acquire queues", func() bool { return lockOf(t, url, "w").GetWaiters() == 1 })
	ts.drop()
	ts.ended()
	until(t, "the dropped stream's wait is withdrawn", func() bool {
		return lockOf(t, url, "w").GetWaiters() == 0 && waitersOf(s) == 0
	})
	if _, err := locks.Release(ctx, connect.NewRequest(&fencev1.ReleaseRequest{Name: "w", Token: held.Msg.Lease.Token})); err != nil {
		t.Fatal(err)
	}
	if li := lockOf(t, url, "w"); li.GetLease() != nil {
		t.Fatalf("lock after the release = %v, want free (no grant to the dropped stream)", li)
	}
	if _, err := c.KeepAlive(ctx, connect.NewRequest(&fencev1.KeepAliveRequest{Session: id})); err != nil {
		t.Fatalf("session after its stream dropped: %v, want alive", err)
	}
}

// Bounds: streams over MaxStreams are refused; requests over
// MaxStreamRequests in flight on one stream are answered
// RESOURCE_EXHAUSTED at once; a message over the request limit ends the
// stream with invalid_argument naming "body".
func TestStreamLimits(t *testing.T) {
	_, url := startServerOnNode(t, Config{MaxStreams: 1, MaxStreamRequests: 1}) // fence_sessions is the node's gauge
	c := sessionClients(url)[0].c
	ctx := context.Background()
	locks := protocols(url)[1].locks
	if _, err := locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "lim", Owner: "other", Ttl: durationpb.New(time.Hour)})); err != nil {
		t.Fatal(err)
	}
	id := openSession(t, c, time.Minute)
	ts := startStream(t, c, &fencev1.SessionRequest{Session: id, Call: 1, Seq: 1, Ack: 1, Op: acquireOp("lim", "me", time.Hour)})
	r := ts.call(&fencev1.SessionRequest{Call: 2, Op: &fencev1.SessionRequest_Read{Read: &fencev1.ReadRequest{Resource: "r"}}})
	var ex *fence.ResourceExhaustedError
	if err := refusedWith(t, r, fence.ReasonResourceExhausted); !errors.As(err, &ex) || !strings.Contains(ex.Limit, "max_stream_requests") || ex.Bound != "at most 1" {
		t.Fatalf("second request in flight = %v, want RESOURCE_EXHAUSTED naming max_stream_requests, at most 1", r)
	}
	// A keepalive is not held back by the waits filling the stream: the
	// session must outlive a client that waits for locks.
	if r := ts.call(&fencev1.SessionRequest{Call: 4, Op: &fencev1.SessionRequest_KeepAlive{KeepAlive: &fencev1.KeepAliveRequest{}}}); r.GetKeepAlive().GetSession().GetId() != id {
		t.Fatalf("keepalive on a stream full of waits = %v, want the session kept alive", r)
	}
	other := startStream(t, c, &fencev1.SessionRequest{Session: id})
	err := other.ended()
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !errors.As(apierr.FromConnect(err), &ex) || !strings.Contains(ex.Limit, "max_streams") {
		t.Fatalf("second stream = %v, want resource_exhausted naming max_streams", err)
	}
	if m := scrapeMetrics(t, url); !strings.Contains(m, "fence_streams 1") || !strings.Contains(m, "fence_sessions 1") || !strings.Contains(m, `fence_stream_requests_total{op="acquire"} 1`) ||
		!strings.Contains(m, `fence_resource_exhausted_total{limit="max_streams"} 1`) {
		t.Fatalf("/metrics lacks the stream gauges and counters:\n%s", m)
	}
	ts.drop()
	ts.ended()
	until(t, "the first stream's slot is free", func() bool { return strings.Contains(scrapeMetrics(t, url), "fence_streams 0") })

	big := startStream(t, c, &fencev1.SessionRequest{Session: id})
	// The send may fail as the server ends the stream; the end tells why.
	_ = big.s.Send(&fencev1.SessionRequest{Call: 3, Op: &fencev1.SessionRequest_Write{Write: &fencev1.WriteRequest{Resource: "r", Token: 1, Value: make([]byte, maxRequestBytes)}}})
	checkBodyLimit(t, big.ended())
}

// The Stream procedure's deadline header is checked like every call's.
func TestStreamMalformedDeadline(t *testing.T) {
	_, url := startServer(t)
	c := fencev1connect.NewSessionServiceClient(h2cClient(), url, connect.WithGRPC(), connect.WithInterceptors(headerInterceptor{"Grpc-Timeout", "soon"}))
	ts := startStream(t, c, &fencev1.SessionRequest{Session: 1})
	checkInvalid(t, ts.ended(), "grpc-timeout")
}

// headerInterceptor sets a header on every streaming call of a client.
type headerInterceptor struct{ key, value string }

func (h headerInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc { return next }
func (h headerInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set(h.key, h.value)
		return conn
	}
}
func (h headerInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// A stream outlives ReadTimeout (it bounds only the wait for the first
// message): an acquire on it that waits four read timeouts is granted,
// and the stream serves on.
func TestStreamOutlivesReadTimeout(t *testing.T) {
	const readTimeout = 200 * time.Millisecond
	_, url := startServerWith(t, Config{ReadTimeout: readTimeout})
	c := sessionClients(url)[0].c
	locks := protocols(url)[1].locks
	held, err := locks.Acquire(context.Background(), connect.NewRequest(&fencev1.AcquireRequest{Name: "long", Ttl: durationpb.New(time.Hour)}))
	if err != nil {
		t.Fatal(err)
	}
	id := openSession(t, c, time.Minute)
	ts := startStream(t, c, &fencev1.SessionRequest{Session: id})
	ts.send(&fencev1.SessionRequest{Call: 1, Seq: 1, Ack: 1, Op: acquireOp("long", "w", time.Minute)})
	// Once it is queued, the holder's lease is cut to end 4 read timeouts
	// from now: the wait lasts at least that long however slow the machine.
	until(t, "the stream's acquire queues", func() bool { return lockOf(t, url, "long").GetWaiters() == 1 })
	if _, err := locks.Renew(context.Background(), connect.NewRequest(&fencev1.RenewRequest{Name: "long", Token: held.Msg.GetLease().GetToken(), Ttl: durationpb.New(4 * readTimeout)})); err != nil {
		t.Fatal(err)
	}
	if r := ts.next(); r.GetCall() != 1 || r.GetAcquire().GetLease().GetOwner() != "w" {
		t.Fatalf("waiting acquire on the stream = %v, want granted once the holder's lease ended", r)
	}
	if r := ts.call(&fencev1.SessionRequest{Call: 2, Op: &fencev1.SessionRequest_KeepAlive{KeepAlive: &fencev1.KeepAliveRequest{}}}); r.GetKeepAlive() == nil {
		t.Fatalf("keepalive after the wait = %v", r)
	}
}

// A stream whose first message does not come within ReadTimeout ends (it
// would hold a slot of MaxStreams for nothing).
func TestStreamFirstMessageWithinReadTimeout(t *testing.T) {
	_, url := startServerWith(t, Config{ReadTimeout: 200 * time.Millisecond})
	c := sessionClients(url)[0].c
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := c.Stream(ctx)
	if err := st.Send(nil); err != nil { // the headers, no message
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := st.Receive()
		errc <- err
	}()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("Receive = a reply, want the stream to end")
		}
	case <-time.After(hangGuard):
		t.Fatalf("a stream without a first message still open after %s", hangGuard)
	}
	until(t, "the stream's slot is free", func() bool { return strings.Contains(scrapeMetrics(t, url), "fence_streams 0") })
}

// Shutdown ends open streams (and the waits in flight on them) with
// unavailable instead of waiting for them.
func TestShutdownEndsStreams(t *testing.T) {
	s, url := startServer(t)
	c := sessionClients(url)[0].c
	ctx := context.Background()
	if _, err := protocols(url)[1].locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "sd", Ttl: durationpb.New(time.Hour)})); err != nil {
		t.Fatal(err)
	}
	id := openSession(t, c, time.Minute)
	ts := startStream(t, c, &fencev1.SessionRequest{Session: id})
	ts.send(&fencev1.SessionRequest{Call: 1, Seq: 1, Ack: 1, Op: acquireOp("sd", "w", time.Hour)})
	until(t, "the acquire queues", func() bool { return waitersOf(s) == 1 })
	sctx, cancel := context.WithTimeout(ctx, hangGuard)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown = %v, want the stream ended, not drained until the timeout", err)
	}
	if err := ts.ended(); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("stream at shutdown ended with %v, want unavailable", err)
	}
}

// A client whose stream broke without the server noticing yet resends a
// queued acquire's seq on a new stream: the retry is a new attempt of the
// same request, answered on the new stream when the lock is handed on, and
// the old stream's end (its attempt withdrawn) does not take the lease
// away.
func TestStreamRetryOfAQueuedAcquire(t *testing.T) {
	s, url := startServer(t)
	c := sessionClients(url)[0].c
	ctx := context.Background()
	locks := protocols(url)[1].locks
	held, err := locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "q", Owner: "other", Ttl: durationpb.New(time.Hour)}))
	if err != nil {
		t.Fatal(err)
	}
	id := openSession(t, c, time.Minute)
	acquire := &fencev1.SessionRequest{Call: 1, Seq: 1, Ack: 1, Op: acquireOp("q", "me", time.Hour)}
	old := startStream(t, c, &fencev1.SessionRequest{Session: id})
	old.send(acquire)
	until(t, "the acquire queues", func() bool { return lockOf(t, url, "q").GetWaiters() == 1 })
	retry := startStream(t, c, &fencev1.SessionRequest{Session: id})
	retry.send(acquire)
	// The retry reaches the node before the release: both attempts wait
	// there (one queue entry of the lock; a waiter registers before its
	// acquire is proposed). Whether the retry is applied before or after
	// the release, its stream gets the grant.
	until(t, "the retry waits beside the first attempt", func() bool { return waitersOf(s) == 2 })
	if _, err := locks.Release(ctx, connect.NewRequest(&fencev1.ReleaseRequest{Name: "q", Token: held.Msg.Lease.Token})); err != nil {
		t.Fatal(err)
	}
	r := retry.next()
	tok := r.GetAcquire().GetLease().GetToken()
	if r.GetCall() != 1 || tok <= held.Msg.Lease.Token || r.GetAcquire().GetLease().GetOwner() != "me" {
		t.Fatalf("retried acquire = %v, want granted on the new stream", r)
	}
	// The old stream may have heard the grant too (the same lease); it
	// drops now.
	old.drop()
	for done := false; !done; {
		select {
		case <-old.replies:
		case err := <-old.end:
			old.end <- err
			done = true
		case <-time.After(hangGuard):
			t.Fatalf("dropped stream did not end within %s", hangGuard)
		}
	}
	if r := retry.call(&fencev1.SessionRequest{Call: 3, Op: &fencev1.SessionRequest_Get{Get: &fencev1.GetRequest{Name: "q"}}}); r.GetGet().GetLock().GetLease().GetToken() != tok || r.GetGet().GetLock().GetWaiters() != 0 {
		t.Fatalf("lock after the old stream dropped = %v, want still held with token %d, nobody queued (the retry was no second wait)", r, tok)
	}
}

// A stream client that stops reading its replies loses the stream once a
// reply cannot be written within WriteTimeout (it would hold a slot of
// MaxStreams and a goroutine per request forever); its slot is freed.
func TestStreamUnreadRepliesAreCut(t *testing.T) {
	s, url := startServerWith(t, Config{WriteTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	// The 1 MiB resource and the session are made through the node and
	// the Service: over HTTP each reply would have to be written within
	// the short WriteTimeout of when its request started (an fsync
	// included), which a loaded machine misses (the Open failed so).
	a, err := storeOf(s).Apply(ctx, state.Command{Op: state.OpAcquire, Name: "big", TTL: time.Hour})
	if err != nil || a.Err != nil {
		t.Fatal(err, a.Err)
	}
	if w, err := storeOf(s).Apply(ctx, state.Command{Op: state.OpWrite, Name: "big", Token: a.Lease.Token, Value: make([]byte, fence.MaxValueBytes)}); err != nil || w.Err != nil {
		t.Fatal(err, w.Err)
	}
	open, err := s.Service().OpenSession(ctx, fence.OpenSessionRequest{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// The client's HTTP/2 receive window is the least (64 KiB), so that
	// the first reply already fills it: the cut then waits for one reply's
	// write to stall, not for several megabytes to be written first (under
	// -race on a loaded box each 1 MiB reply took up to a second to write,
	// which is what the hang guard measured).
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	h2 := &http.Client{Transport: tracked(&http.Transport{Protocols: p, HTTP2: &http.HTTP2Config{MaxReceiveBufferPerStream: 64 << 10}})}
	c := fencev1connect.NewSessionServiceClient(h2, url, connect.WithGRPC())
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := c.Stream(sctx)
	defer st.CloseResponse()
	// 64 reads of 1 MiB, far more than the client's HTTP/2 receive window
	// holds, and no Receive.
	for i := range 64 {
		m := &fencev1.SessionRequest{Call: uint64(i), Op: &fencev1.SessionRequest_Read{Read: &fencev1.ReadRequest{Resource: "big"}}}
		if i == 0 {
			m.Session = open.Session.ID
		}
		if err := st.Send(m); err != nil {
			break // the server has ended the stream
		}
	}
	// The stream's end is counted (fence_requests_total, when its handler
	// returns): a count, so it cannot be missed as the gauge of open
	// streams going 1 and back to 0 between two looks can, nor seen
	// before the server has taken the stream at all.
	until(t, "the unread stream is cut", func() bool { return counted(t, s, "fence_requests_total", streamProc) >= 1 })
	if n := s.streams.Load(); n != 0 {
		t.Fatalf("open streams after the unread one was cut = %d, want 0 (its slot freed)", n)
	}
}

// counted is the value of the counter name whose labels include every
// one of values (summed over the series that match), read from the
// server's registry in-process (a scrape over HTTP would itself be a
// reply under WriteTimeout).
func counted(t *testing.T, s *Server, name string, values ...string) float64 {
	t.Helper()
	mfs, err := s.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := make(map[string]bool)
			for _, l := range m.GetLabel() {
				have[l.GetValue()] = true
			}
			for _, v := range values {
				if !have[v] {
					continue series
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// A session closed while an acquire of it waits on its stream: the wait
// ends with SESSION_EXPIRED (the reply), the stream stays open, and the
// lock stays with its holder with nobody queued.
func TestStreamWaitEndsWithItsSession(t *testing.T) {
	_, url := startServer(t)
	c := sessionClients(url)[0].c
	ctx := context.Background()
	held, err := protocols(url)[1].locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "se", Owner: "other", Ttl: durationpb.New(time.Hour)}))
	if err != nil {
		t.Fatal(err)
	}
	id := openSession(t, c, time.Minute)
	ts := startStream(t, c, &fencev1.SessionRequest{Session: id, Call: 1, Seq: 1, Ack: 1, Op: acquireOp("se", "me", time.Hour)})
	until(t, "the acquire queues", func() bool { return lockOf(t, url, "se").GetWaiters() == 1 })
	if _, err := c.Close(ctx, connect.NewRequest(&fencev1.CloseSessionRequest{Session: id})); err != nil {
		t.Fatal(err)
	}
	r := ts.next()
	var se *fence.SessionExpiredError
	if err := refusedWith(t, r, fence.ReasonSessionExpired); r.GetCall() != 1 || !errors.As(err, &se) || se.Session != id {
		t.Fatalf("waiting acquire when its session closed = %v, want SESSION_EXPIRED for call 1", r)
	}
	if li := lockOf(t, url, "se"); li.GetWaiters() != 0 || li.GetLease().GetToken() != held.Msg.Lease.GetToken() {
		t.Fatalf("lock = %v, want still held by other, nobody queued", li)
	}
	if r := ts.call(&fencev1.SessionRequest{Call: 2, Op: &fencev1.SessionRequest_Get{Get: &fencev1.GetRequest{Name: "se"}}}); r.GetGet() == nil {
		t.Fatalf("get on the stream after its session closed = %v, want served", r)
	}
}
