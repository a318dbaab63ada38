package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

func TestTryAcquireBusyCarriesFacts(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	a, b := newClient(t), newClient(t)
	held, err := a.Acquire(ctx, name, client.TTL(10*time.Second), client.Owner("worker-a"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Acquire(ctx, name, client.TTL(time.Second), client.Owner("worker-b"))
	if !errors.Is(err, fence.ErrBusy) {
		t.Fatalf("second acquire: got %v, want ErrBusy", err)
	}
	var busy *fence.BusyError
	if !errors.As(err, &busy) {
		t.Fatalf("errors.As(*fence.BusyError) failed on %T %v", err, err)
	}
	if busy.Holder != "worker-a" || busy.Token != held.Token() || busy.Name != name {
		t.Errorf("busy facts = %+v, want holder worker-a token %d name %s", busy, held.Token(), name)
	}
	if busy.Remaining <= 0 || busy.Remaining > 10*time.Second {
		t.Errorf("busy remaining = %s, want in (0, 10s]", busy.Remaining)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := b.Acquire(ctx, name, client.TTL(time.Second))
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	if again.Token() <= held.Token() {
		t.Errorf("token after release %d, want > %d", again.Token(), held.Token())
	}
}

func TestAcquireWaitGrantsFIFO(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	c := newClient(t)
	holder, err := c.Acquire(ctx, name, client.TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	type grant struct {
		waiter int
		token  fence.Token
		err    error
	}
	grants := make(chan grant, 3)
	release := make(chan struct{})
	for i := 1; i <= 3; i++ {
		go func() {
			l, err := newClient(t).Acquire(ctx, name, client.TTL(10*time.Second), client.Wait(20*time.Second))
			if err != nil {
				grants <- grant{waiter: i, err: err}
				return
			}
			grants <- grant{waiter: i, token: l.Token()}
			<-release
			l.Release(ctx)
		}()
		waitForWaiters(t, c, name, i) // waiter i is queued before i+1 starts
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var last fence.Token
	for want := 1; want <= 3; want++ {
		g := <-grants
		if g.err != nil {
			t.Fatalf("waiter %d: %v", g.waiter, g.err)
		}
		if g.waiter != want {
			t.Fatalf("grant %d went to waiter %d, want FIFO order", want, g.waiter)
		}
		if g.token <= last {
			t.Fatalf("waiter %d token %d not above previous %d", g.waiter, g.token, last)
		}
		last = g.token
		release <- struct{}{}
	}
}

// waitForWaiters polls the server until lock name has n queued acquirers.
func waitForWaiters(t *testing.T, c *client.Client, name string, n int) {
	t.Helper()
	for {
		info, err := c.Get(ctxFor(t), name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAcquireWaitRunsOutIsBusy(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	c := newClient(t)
	if _, err := c.Acquire(ctx, name, client.TTL(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Acquire(ctx, name, client.TTL(time.Second), client.Wait(50*time.Millisecond))
	var busy *fence.BusyError
	if !errors.As(err, &busy) || !busy.Waited {
		t.Fatalf("got %v, want *fence.BusyError with Waited", err)
	}
}

func TestAcquireRetryAfterLostReplyReturnsSameLease(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	proxy, url := newLossyProxy(t, serverURL, "Acquire")
	c := newClientFor(t, url)
	l, err := c.Acquire(ctx, name, client.TTL(10*time.Second))
	if err != nil {
		t.Fatalf("acquire through a lossy proxy: %v", err)
	}
	if proxy.count() != 2 {
		t.Fatalf("proxy saw %d Acquire attempts, want 2 (one lost reply, one retry)", proxy.count())
	}
	info, err := newClient(t).Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if info.Lease == nil || info.Lease.Token != l.Token() || info.LastToken != l.Token() {
		t.Fatalf("server lock = %+v, want held with the retried lease's token %d and no second grant", info, l.Token())
	}
}

// A retry that learns the lease its first attempt was granted has ended
// (here released behind the client's back, as the server does when a
// dropped connection abandons a wait) holds nothing: the call asks again as
// a new request and gets a new lease, never the ended one. With a
// request_id of the caller's own, the caller gets the certain answer.
func TestAcquireRetryAfterGrantEndedAsksAgain(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	other := newClient(t)
	var ended fence.Token
	endGrant := func() {
		info, err := other.Get(ctx, name)
		if err != nil || info.Lease == nil {
			t.Errorf("after the lost reply: lock %+v, %v; want held", info, err)
			return
		}
		ended = info.Lease.Token
		if err := other.Release(ctx, name, ended); err != nil {
			t.Errorf("release behind the client's back: %v", err)
		}
	}

	proxy, url := newLossyProxy(t, serverURL, "Acquire")
	proxy.afterLoss = endGrant
	l, err := newClientFor(t, url).Acquire(ctx, name, client.TTL(10*time.Second))
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	defer l.Release(ctx)
	if ended == 0 || l.Token() <= ended {
		t.Fatalf("got token %d; want a new grant after the ended one (%d)", l.Token(), ended)
	}
	if proxy.count() != 3 {
		t.Fatalf("proxy saw %d Acquire attempts, want 3 (lost reply, ended grant, new request)", proxy.count())
	}
	l.Release(ctx)

	proxy2, url2 := newLossyProxy(t, serverURL, "Acquire")
	proxy2.afterLoss = endGrant
	_, err = newClientFor(t, url2).Acquire(ctx, name, client.TTL(10*time.Second), client.RequestID("mine-"+name))
	var nh *fence.NotHolderError
	if !errors.As(err, &nh) || nh.Token != ended {
		t.Fatalf("own request_id whose grant ended: got %v, want *fence.NotHolderError with token %d", err, ended)
	}
}

func TestAcquireSameRequestIDSameLease(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	c := newClient(t)
	first, err := c.Acquire(ctx, name, client.TTL(10*time.Second), client.RequestID("req-"+name))
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Acquire(ctx, name, client.TTL(10*time.Second), client.RequestID("req-"+name))
	if err != nil {
		t.Fatalf("repeated request_id: %v", err)
	}
	if second.Token() != first.Token() {
		t.Fatalf("repeated request_id got token %d, first got %d", second.Token(), first.Token())
	}
	_, err = c.Acquire(ctx, name, client.TTL(10*time.Second), client.RequestID("other-"+name))
	if !errors.Is(err, fence.ErrBusy) {
		t.Fatalf("a different request_id: got %v, want ErrBusy", err)
	}
}

func TestAcquireInvalidInputTyped(t *testing.T) {
	ctx := ctxFor(t)
	c := newClient(t)
	cases := []struct {
		name  string
		opts  []client.AcquireOption
		field string
	}{
		{"", nil, "name"},
		{string(make([]byte, fence.MaxNameBytes+1)), nil, "name"},
		{"x", []client.AcquireOption{client.TTL(time.Millisecond)}, "ttl"},
		{"x", []client.AcquireOption{client.Wait(-time.Second)}, "wait"},
		{"x", []client.AcquireOption{client.LockDelay(25 * time.Hour)}, "lock_delay"},
		{"x", []client.AcquireOption{client.Owner(string(make([]byte, fence.MaxOwnerBytes+1)))}, "owner"},
		{"x", []client.AcquireOption{client.TTL(25 * time.Hour)}, "ttl"},      // refused by the server
		{"x", []client.AcquireOption{client.RequestID("\xfe")}, "request_id"}, // a protobuf string cannot carry it
	}
	for _, tc := range cases {
		_, err := c.Acquire(ctx, tc.name, tc.opts...)
		var inv *fence.InvalidError
		if !errors.As(err, &inv) || inv.Field != tc.field || inv.Bound == "" {
			t.Errorf("acquire(%.10q): got %v, want *fence.InvalidError on field %s with a bound", tc.name, err, tc.field)
		}
	}
}
