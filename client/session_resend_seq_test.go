package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// TestSessionResendKeepsSeq: after a reconnect the session resends every
// unanswered request under the SAME seq, so that the server answers it
// with the saved result instead of applying it again (exactly once).
// Each case is a request whose exactly-once-ness rests on seq alone (a
// session acquire carries no request_id, a release no op_id): its reply is
// dropped by the tap after the server sent it (so the server neither
// cancels nor releases anything), then the TCP connection under the stream
// is cut. The resend must carry the first send's seq, be answered
// replayed, and the server must show the request applied once.
func TestSessionResendKeepsSeq(t *testing.T) {
	// setup returns a session client through a TCP proxy and the tap, with
	// the session open and its stream attached.
	setup := func(t *testing.T, ctx context.Context, name string) (*client.Client, *tcpProxy, *tap) {
		proxy, url := newTCPProxy(t, serverURL)
		tp := newTap(t)
		c := newClientFor(t, url, client.WithHTTPClient(tp.client()), client.WithBackoff(10*time.Millisecond, 100*time.Millisecond))
		l, err := c.Acquire(ctx, name+"-open")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Release(context.Background()) })
		return c, proxy, tp
	}
	// dropFirst makes the tap drop the reply to the first request pick
	// chooses, and returns a function that waits until the tap has dropped
	// it, cuts the connection and returns that request.
	dropFirst := func(t *testing.T, ctx context.Context, proxy *tcpProxy, tp *tap, pick func(r *tapReq) bool) func() *tapReq {
		dropped := false
		tp.setStreamRule(func(r *tapReq) replyAction {
			if !dropped && pick(r) {
				dropped = true
				return replyAction{drop: true}
			}
			return replyAction{}
		})
		return func() *tapReq {
			var first *tapReq
			tp.wait(t, ctx, "the first send's reply, dropped", func() bool {
				first = tp.findReq(pick)
				if first == nil {
					return false
				}
				r, ok := tp.replyTo(first)
				return ok && r.dropped
			})
			proxy.cut()
			return first
		}
	}
	// resentOf checks the resend of first: on a later stream, same seq,
	// answered replayed.
	resentOf := func(t *testing.T, tp *tap, first *tapReq, pick func(r *tapReq) bool) {
		t.Helper()
		resent := tp.findReq(func(r *tapReq) bool { return r.stream > first.stream && pick(r) })
		if resent == nil {
			t.Fatal("the request was not resent on a new stream")
		}
		if resent.msg.GetSeq() != first.msg.GetSeq() {
			t.Fatalf("resent with seq %d, first sent with seq %d: a resend must keep its seq (exactly once)", resent.msg.GetSeq(), first.msg.GetSeq())
		}
		if r, ok := tp.replyTo(resent); !ok || !r.msg.GetReplayed() {
			t.Errorf("the resend's reply %v: want replayed (the server's saved result)", r.msg)
		}
	}

	t.Run("acquire", func(t *testing.T) {
		ctx, name := ctxFor(t), uniq(t)
		c, proxy, tp := setup(t, ctx, name)
		pick := func(r *tapReq) bool { return r.msg.GetAcquire().GetName() == name }
		cutAfterDrop := dropFirst(t, ctx, proxy, tp, pick)
		type result struct {
			l   *client.Lease
			err error
		}
		got := make(chan result, 1)
		go func() {
			l, err := c.Acquire(ctx, name)
			got <- result{l, err}
		}()
		first := cutAfterDrop()
		firstReply, _ := tp.replyTo(first)
		granted := fence.Token(firstReply.msg.GetAcquire().GetLease().GetToken())
		res := <-got
		if res.err != nil {
			t.Fatalf("acquire across the reconnect: %v (the resend was applied as a new acquire of a lock its first send holds)", res.err)
		}
		defer res.l.Release(ctx)
		if res.l.Token() != granted {
			t.Fatalf("acquire returned token %d, the first send was granted %d", res.l.Token(), granted)
		}
		resentOf(t, tp, first, pick)
		info, err := newClient(t, client.WithoutSession()).Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Lease == nil || info.Lease.Token != res.l.Token() || info.LastToken != res.l.Token() || info.Waiters != 0 {
			t.Fatalf("lock %+v (lease %+v): want held by token %d, its only grant, nobody waiting", info, info.Lease, res.l.Token())
		}
	})

	// A waiting acquire granted while it waited, whose grant's reply is
	// lost: the resend (still with its wait) must get that grant, not wait
	// behind it.
	t.Run("waited acquire", func(t *testing.T) {
		ctx, name := ctxFor(t), uniq(t)
		holder := newClient(t, client.WithoutSession())
		h, err := holder.Acquire(ctx, name, client.TTL(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		c, proxy, tp := setup(t, ctx, name)
		pick := func(r *tapReq) bool { return r.msg.GetAcquire().GetName() == name }
		cutAfterDrop := dropFirst(t, ctx, proxy, tp, pick)
		type result struct {
			l   *client.Lease
			err error
		}
		got := make(chan result, 1)
		go func() {
			l, err := c.Acquire(ctx, name, client.Wait(20*time.Second))
			got <- result{l, err}
		}()
		waitWaiters(t, ctx, holder, name, 1)
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
		first := cutAfterDrop()
		firstReply, _ := tp.replyTo(first)
		granted := fence.Token(firstReply.msg.GetAcquire().GetLease().GetToken())
		if granted == 0 {
			t.Fatalf("the first send was answered %v, want a grant", firstReply.msg)
		}
		res := <-got
		if res.err != nil {
			t.Fatalf("waiting acquire across the reconnect: %v", res.err)
		}
		defer res.l.Release(ctx)
		if res.l.Token() != granted {
			t.Fatalf("acquire returned token %d, the first send was granted %d", res.l.Token(), granted)
		}
		resentOf(t, tp, first, pick)
		info, err := holder.Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Lease == nil || info.Lease.Token != granted || info.LastToken != granted || info.Waiters != 0 {
			t.Fatalf("lock %+v (lease %+v): want held by token %d, its last grant, nobody waiting", info, info.Lease, granted)
		}
	})

	t.Run("release", func(t *testing.T) {
		ctx, name := ctxFor(t), uniq(t)
		c, proxy, tp := setup(t, ctx, name)
		l, err := c.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		pick := func(r *tapReq) bool { return r.msg.GetRelease().GetName() == name }
		cutAfterDrop := dropFirst(t, ctx, proxy, tp, pick)
		released := make(chan error, 1)
		go func() { released <- l.Release(ctx) }()
		first := cutAfterDrop()
		if err := <-released; err != nil {
			t.Fatalf("release across the reconnect: %v (the resend was applied again, to a lock its first send freed)", err)
		}
		resentOf(t, tp, first, pick)
		info, err := newClient(t, client.WithoutSession()).Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Lease != nil || info.LastToken != l.Token() {
			t.Fatalf("lock %+v (lease %+v): want free, last granted token %d", info, info.Lease, l.Token())
		}
	})
}
