package client_test

import (
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/client"
)

// G8 for renewals and keepalives: a lease's safe deadline counts from when
// the renew or keepalive was SENT, never from when its reply arrived, and
// a reply to an older send may only pull the deadline in.
//
// The tap (streamtap_test.go) notes when it saw each request — a reading
// of the test's clock taken after the client sent it — and holds chosen
// replies back. Each check is an ordering of clock readings: the deadline
// must not be after seen + the time the server said was left. A deadline
// counted from the reply's arrival is later than that by about the hold
// (keepAliveReplyHold) minus the drift margin (1% of the TTL), so it fails
// at any machine speed; a slower machine only makes the reply later.

// keepAliveReplyHold is how long a reply is held back after its request
// was seen: the delay under test, not a synchronisation. It must exceed
// the safe deadline's margin (1% of deadlineTTL: 600ms).
const keepAliveReplyHold = time.Second

// deadlineTTL is the TTL of the send-time tests: a keepalive attempt gets
// TTL/3 (20s) and other attempts get WithAttemptTimeout (1m here) before
// they are abandoned and retried, far more than the hold even on a loaded
// machine, so the reply held back is the one that sets the deadline.
const deadlineTTL = time.Minute

// holdUntil returns once the test's clock has passed seen + d: the delay
// under test.
func holdUntil(seen time.Time, d time.Duration) {
	time.Sleep(time.Until(seen.Add(d)))
}

// TestLeaseRenewDeadlineFromSendTime: Lease.Renew of a standalone lease
// whose reply is held back 1s sets the deadline from the renew's send
// time: at most (when the tap saw the renew) + TTL.
func TestLeaseRenewDeadlineFromSendTime(t *testing.T) {
	t.Parallel() // waits out a held reply or a silent network on a proxy of its own
	const ttl = deadlineTTL
	ctx, name := ctxFor(t), uniq(t)
	tp := newTap(t)
	c := newClient(t, client.WithoutSession(), client.WithHTTPClient(tp.client()), client.WithAttemptTimeout(time.Minute))
	l, err := c.Acquire(ctx, name, client.TTL(ttl), client.KeepAlive(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	before := l.Deadline()

	gate := make(chan struct{})
	tp.setUnaryRule(func(u *tapUnary) <-chan struct{} {
		if u.method == "Renew" {
			return gate
		}
		return nil
	})
	renewed := make(chan error, 1)
	go func() { renewed <- l.Renew(ctx) }()
	var u tapUnary
	tp.wait(t, ctx, "the renew answered by the server", func() bool {
		var ok bool
		u, ok = tp.unaryCall("Renew", 1)
		return ok && !u.answered.IsZero()
	})
	holdUntil(u.seen, keepAliveReplyHold)
	close(gate)
	if err := <-renewed; err != nil {
		t.Fatal(err)
	}
	checkDeadlineFromSend(t, "Lease.Renew", l.Deadline(), before, u.seen, ttl)
}

// TestLeaseKeepAliveDeadlineFromSendTime: the background keepalive of a
// standalone lease, its first renew's reply held back 1s, sets the
// deadline from that renew's send time. Later renews are held for good,
// so the deadline read is the first renew's; the second renew being sent
// is the event that says the first one's reply was handled (the loop is
// sequential).
func TestLeaseKeepAliveDeadlineFromSendTime(t *testing.T) {
	t.Parallel() // waits out a held reply or a silent network on a proxy of its own
	const ttl = deadlineTTL
	ctx, name := ctxFor(t), uniq(t)
	tp := newTap(t)
	gate, never := make(chan struct{}), make(chan struct{})
	tp.setUnaryRule(func(u *tapUnary) <-chan struct{} {
		switch {
		case u.method != "Renew":
			return nil
		case u.n == 1:
			return gate
		default:
			return never
		}
	})
	c := newClient(t, client.WithoutSession(), client.WithHTTPClient(tp.client()))
	l, err := c.Acquire(ctx, name, client.TTL(ttl), client.KeepAlive(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer newClient(t).Release(ctx, name, l.Token())
	before := l.Deadline()

	var u tapUnary
	tp.wait(t, ctx, "the first keepalive renew answered by the server", func() bool {
		var ok bool
		u, ok = tp.unaryCall("Renew", 1)
		return ok && !u.answered.IsZero()
	})
	holdUntil(u.seen, keepAliveReplyHold)
	close(gate)
	tp.wait(t, ctx, "the second keepalive renew (sent once the first one's reply was handled)", func() bool {
		_, ok := tp.unaryCall("Renew", 2)
		return ok
	})
	if err := l.Err(); err != nil {
		t.Fatalf("lease lost: %v", err)
	}
	checkDeadlineFromSend(t, "the keepalive", l.Deadline(), before, u.seen, ttl)
}

// TestSessionKeepAliveDeadlineFromSendTime: the session's keepalive (the
// one its stream opens with), its reply held back 1s while the session's
// other replies pass, sets the session's safe deadline — the deadline of
// every lease of the session — from the keepalive's send time. Later
// keepalives' replies are held for good, so the deadline read is this
// one's; a Write answered after the released reply orders its handling
// before the read.
func TestSessionKeepAliveDeadlineFromSendTime(t *testing.T) {
	t.Parallel() // waits out a held reply or a silent network on a proxy of its own
	const ttl = deadlineTTL
	ctx, name := ctxFor(t), uniq(t)
	tp := newTap(t)
	gate, never := make(chan struct{}), make(chan struct{})
	keepAlives := 0
	tp.setStreamRule(func(r *tapReq) replyAction {
		if r.msg.GetKeepAlive() == nil {
			return replyAction{}
		}
		keepAlives++
		if keepAlives == 1 {
			return replyAction{gate: gate}
		}
		return replyAction{gate: never}
	})
	c := newClient(t, client.WithSessionTTL(ttl), client.WithHTTPClient(tp.client()))
	l, err := c.Acquire(ctx, name) // opens the session; its stream starts with a keepalive
	if err != nil {
		t.Fatal(err)
	}
	before := l.Deadline() // from the Open's send time

	ka := tp.findReq(func(r *tapReq) bool { return r.msg.GetKeepAlive() != nil })
	if ka == nil {
		t.Fatal("the stream did not start with a keepalive")
	}
	var reply tapReply
	tp.wait(t, ctx, "the keepalive answered by the server", func() bool {
		var ok bool
		reply, ok = tp.replyTo(ka)
		return ok
	})
	holdUntil(ka.seen, keepAliveReplyHold)
	close(gate)
	tp.wait(t, ctx, "the keepalive's reply handed to the client", func() bool {
		r, _ := tp.replyTo(ka)
		return !r.delivered.IsZero()
	})
	if _, err := c.Write(ctx, name+"/res", l.Token(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	remaining := reply.msg.GetKeepAlive().GetSession().GetRemaining().AsDuration()
	if remaining <= 0 || remaining > ttl {
		t.Fatalf("keepalive reply with %v left, want (0, %v]", remaining, ttl)
	}
	checkDeadlineFromSend(t, "the session keepalive", l.Deadline(), before, ka.seen, remaining)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSessionLeaseRenewDeadlineFromSendTime: Lease.Renew of a lease bound
// to the session (it extends the session) with its reply held back 1s
// sets the session's deadline from the renew's send time. Keepalives after
// the stream's first are held for good, so only the renew moves it.
func TestSessionLeaseRenewDeadlineFromSendTime(t *testing.T) {
	t.Parallel() // waits out a held reply or a silent network on a proxy of its own
	const ttl = deadlineTTL
	ctx, name := ctxFor(t), uniq(t)
	tp := newTap(t)
	c := newClient(t, client.WithSessionTTL(ttl), client.WithHTTPClient(tp.client()))
	l, err := c.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	gate, never := make(chan struct{}), make(chan struct{})
	tp.setStreamRule(func(r *tapReq) replyAction {
		switch {
		case r.msg.GetRenew() != nil:
			return replyAction{gate: gate}
		case r.msg.GetKeepAlive() != nil:
			return replyAction{gate: never}
		}
		return replyAction{}
	})
	before := l.Deadline()
	renewed := make(chan error, 1)
	go func() { renewed <- l.Renew(ctx) }()
	var renew *tapReq
	var reply tapReply
	tp.wait(t, ctx, "the renew answered by the server", func() bool {
		if renew = tp.findReq(func(r *tapReq) bool { return r.msg.GetRenew() != nil }); renew == nil {
			return false
		}
		var ok bool
		reply, ok = tp.replyTo(renew)
		return ok
	})
	holdUntil(renew.seen, keepAliveReplyHold)
	close(gate)
	if err := <-renewed; err != nil {
		t.Fatal(err)
	}
	checkDeadlineFromSend(t, "the session lease's renew", l.Deadline(), before, renew.seen, reply.msg.GetRenew().GetLease().GetRemaining().AsDuration())
}

// TestSessionOpenDeadlineFromSendTime: the session's first deadline, set
// by its Open (held back 1s), counts from the Open's send time. The
// stream's keepalives are held for good, so the deadline read is the
// Open's.
func TestSessionOpenDeadlineFromSendTime(t *testing.T) {
	t.Parallel() // waits out a held reply or a silent network on a proxy of its own
	const ttl = deadlineTTL
	ctx, name := ctxFor(t), uniq(t)
	tp := newTap(t)
	gate, never := make(chan struct{}), make(chan struct{})
	tp.setUnaryRule(func(u *tapUnary) <-chan struct{} {
		if u.method == "Open" {
			return gate
		}
		return nil
	})
	tp.setStreamRule(func(r *tapReq) replyAction {
		if r.msg.GetKeepAlive() != nil {
			return replyAction{gate: never}
		}
		return replyAction{}
	})
	c := newClient(t, client.WithSessionTTL(ttl), client.WithHTTPClient(tp.client()), client.WithAttemptTimeout(time.Minute))
	type result struct {
		l   *client.Lease
		err error
	}
	got := make(chan result, 1)
	opening := time.Now()
	go func() {
		l, err := c.Acquire(ctx, name)
		got <- result{l, err}
	}()
	var open tapUnary
	tp.wait(t, ctx, "the Open answered by the server", func() bool {
		var ok bool
		open, ok = tp.unaryCall("Open", 1)
		return ok && !open.answered.IsZero()
	})
	holdUntil(open.seen, keepAliveReplyHold)
	close(gate)
	res := <-got
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer res.l.Release(ctx)
	// before: a deadline counted from before the Open was sent, with no
	// time left at all, is earlier than any the Open can set.
	checkDeadlineFromSend(t, "the session's Open", res.l.Deadline(), opening, open.seen, ttl)
}

// checkDeadlineFromSend: deadline, set by a renewal seen by the tap at
// seen with left time left on the server, moved past before (the renewal
// counted) and is not after seen + left (it counts from the send time,
// which is before seen).
func checkDeadlineFromSend(t *testing.T, what string, deadline, before, seen time.Time, left time.Duration) {
	t.Helper()
	if !deadline.After(before) {
		t.Fatalf("%s did not move the deadline: %v, before it %v", what, deadline, before)
	}
	if bound := seen.Add(left); deadline.After(bound) {
		t.Fatalf("deadline %v after %s was sent, later than send + %v left (≤ %v after it): counted from the reply's arrival (held back %v), not the send time (G8)",
			deadline.Sub(seen), what, left, left, keepAliveReplyHold)
	}
}

// TestLeaseOlderRenewReplyOnlyPullsDeadlineIn: two renews of a standalone
// lease in flight, the older one's reply delivered last. The older one was
// applied while the lease's TTL was 1m; then the TTL was cut to 10s
// elsewhere and the newer renew got 10s. The older reply's later deadline
// must not be taken: the deadline stays at most the newer renew's send +
// 10s, and the lease's TTL 10s.
func TestLeaseOlderRenewReplyOnlyPullsDeadlineIn(t *testing.T) {
	const long, short = time.Minute, 10 * time.Second
	ctx, name := ctxFor(t), uniq(t)
	tp := newTap(t)
	c := newClient(t, client.WithoutSession(), client.WithHTTPClient(tp.client()), client.WithAttemptTimeout(time.Minute))
	l, err := c.Acquire(ctx, name, client.TTL(long), client.KeepAlive(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)

	gate := make(chan struct{})
	tp.setUnaryRule(func(u *tapUnary) <-chan struct{} {
		if u.method == "Renew" && u.n == 1 {
			return gate
		}
		return nil
	})
	older := make(chan error, 1)
	go func() { older <- l.Renew(ctx) }()
	tp.wait(t, ctx, "the older renew answered by the server (1m left)", func() bool {
		u, ok := tp.unaryCall("Renew", 1)
		return ok && !u.answered.IsZero()
	})
	if _, err := newClient(t, client.WithoutSession()).Renew(ctx, name, l.Token(), short); err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(ctx); err != nil { // the newer renew: answered at once, 10s left
		t.Fatal(err)
	}
	newer, _ := tp.unaryCall("Renew", 2)
	afterNewer := l.Deadline()
	close(gate)
	if err := <-older; err != nil {
		t.Fatal(err)
	}
	if d, bound := l.Deadline(), newer.seen.Add(short); d.After(bound) || d.After(afterNewer) {
		t.Fatalf("deadline %v after the newer renew was sent, %v after the deadline it set: the older renew's reply (1m left) pushed it out; want ≤ %v (G8)",
			d.Sub(newer.seen), d.Sub(afterNewer), short)
	}
	if got := l.TTL(); got != short {
		t.Errorf("TTL %v after the older reply, want the newer renew's %v", got, short)
	}
}

// TestSessionOlderKeepAliveReplyOnlyPullsDeadlineIn: the session's
// keepalive (applied while the session's TTL was 1m) and a newer renew of
// one of its leases (after the session's TTL was cut to 10s elsewhere) are
// in flight; the keepalive's reply comes last. The session's deadline
// must stay at most the renew's send + its 10s: the older reply may only
// pull it in. Later keepalives' replies are held for good, so nothing
// newer lands after the older reply.
func TestSessionOlderKeepAliveReplyOnlyPullsDeadlineIn(t *testing.T) {
	const long, short = time.Minute, 10 * time.Second
	ctx, name := ctxFor(t), uniq(t)
	tp := newTap(t)
	gate, never := make(chan struct{}), make(chan struct{})
	keepAlives := 0
	tp.setStreamRule(func(r *tapReq) replyAction {
		if r.msg.GetKeepAlive() == nil {
			return replyAction{}
		}
		keepAlives++
		if keepAlives == 1 {
			return replyAction{gate: gate}
		}
		return replyAction{gate: never}
	})
	c := newClient(t, client.WithSessionTTL(long), client.WithHTTPClient(tp.client()))
	l, err := c.Acquire(ctx, name) // opens the session; its stream starts with a keepalive
	if err != nil {
		t.Fatal(err)
	}
	ka := tp.findReq(func(r *tapReq) bool { return r.msg.GetKeepAlive() != nil })
	if ka == nil {
		t.Fatal("the stream did not start with a keepalive")
	}
	var kaReply tapReply
	tp.wait(t, ctx, "the keepalive answered by the server (1m left)", func() bool {
		var ok bool
		kaReply, ok = tp.replyTo(ka)
		return ok
	})
	if left := kaReply.msg.GetKeepAlive().GetSession().GetRemaining().AsDuration(); left <= short {
		t.Fatalf("keepalive answered with %v left, want the session's 1m", left)
	}

	// Whoever holds the session's id may shorten it.
	sessions := fencev1connect.NewSessionServiceClient(http.DefaultClient, serverURL)
	if _, err := sessions.KeepAlive(ctx, connect.NewRequest(&fencev1.KeepAliveRequest{Session: c.SessionID(), Ttl: durationpb.New(short)})); err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(ctx); err != nil { // newer than the keepalive; answered at once
		t.Fatal(err)
	}
	renew := tp.findReq(func(r *tapReq) bool { return r.msg.GetRenew() != nil })
	renewReply, ok := tp.replyTo(renew)
	if !ok {
		t.Fatal("the renew's reply did not pass the tap")
	}
	left := renewReply.msg.GetRenew().GetLease().GetRemaining().AsDuration()
	if left <= 0 || left > short {
		t.Fatalf("renew answered with %v left, want (0, %v]", left, short)
	}
	afterRenew := l.Deadline()

	close(gate)
	tp.wait(t, ctx, "the keepalive's reply handed to the client", func() bool {
		r, _ := tp.replyTo(ka)
		return !r.delivered.IsZero()
	})
	if _, err := c.Write(ctx, name+"/res", l.Token(), []byte("x")); err != nil { // answered after it: handled after it
		t.Fatal(err)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("lease lost: %v", err)
	}
	if d, bound := l.Deadline(), renew.seen.Add(left); d.After(bound) || d.After(afterRenew) {
		t.Fatalf("session deadline %v after the renew was sent, %v after the deadline the renew set: the older keepalive's reply (%v left) pushed it out; want ≤ %v (G8)",
			d.Sub(renew.seen), d.Sub(afterRenew), kaReply.msg.GetKeepAlive().GetSession().GetRemaining().AsDuration(), left)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
