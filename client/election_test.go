package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// Campaign blocks while another leads, and leads once it resigns, with a
// larger token; the leader's value is what it proclaimed; a resigned
// leader's Proclaim is refused; a leader that lost its lease (no keepalive
// past its TTL) and wakes after another took over has its Proclaim refused
// by the store with the newer leader's token.
func TestElectionCampaignProclaimResign(t *testing.T) {
	ctx := ctxFor(t)
	name := uniq(t)
	a, b := newClient(t), newClient(t)
	ea, eb := a.Election(name), b.Election(name)
	if _, err := ea.Leader(ctx); !errors.Is(err, client.ErrNoLeader) {
		t.Fatalf("leader of a new election: %v, want ErrNoLeader", err)
	}
	la, err := ea.Campaign(ctx, []byte("a"), client.Owner("A"))
	if err != nil {
		t.Fatal(err)
	}
	if ld, err := eb.Leader(ctx); err != nil || ld.Token != la.Token() || ld.Owner != "A" || string(ld.Value) != "a" {
		t.Fatalf("leader %+v %v, want A with value a", ld, err)
	}
	if err := ea.Proclaim(ctx, []byte("a2")); err != nil {
		t.Fatal(err)
	}
	won := make(chan *client.Lease, 1)
	go func() {
		l, err := eb.Campaign(ctx, []byte("b"), client.Owner("B"))
		if err != nil {
			t.Error(err)
		}
		won <- l
	}()
	// B queues behind A (a waiter on the election's lock) before A resigns.
	for {
		li, err := a.Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if li.Waiters == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if ld, _ := eb.Leader(ctx); string(ld.Value) != "a2" {
		t.Fatalf("value %q, want a2 (proclaimed)", ld.Value)
	}
	if err := ea.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	lb := <-won
	if lb == nil || lb.Token() <= la.Token() {
		t.Fatalf("B leads with %v, want a token above A's %d", lb, la.Token())
	}
	if err := ea.Proclaim(ctx, []byte("a3")); !errors.Is(err, client.ErrNoLeader) {
		t.Fatalf("a resigned leader's proclaim: %v, want ErrNoLeader", err)
	}
	if err := eb.Resign(ctx); err != nil {
		t.Fatal(err)
	}

	// A deposed leader: A leads with a 100ms lease and no keepalive; once it
	// is lost, B leads and proclaims; A's proclaim is refused by the store.
	stale := a.Election(name)
	l, err := stale.Campaign(ctx, []byte("old"), client.TTL(100*time.Millisecond), client.KeepAlive(-1), client.Owner("A"))
	if err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	lb, err = b.Election(name).Campaign(ctx, []byte("new"), client.Owner("B"))
	if err != nil {
		t.Fatal(err)
	}
	// Its client knows the lease is lost: Proclaim refuses before writing.
	if err := stale.Proclaim(ctx, []byte("late")); !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("the deposed leader's proclaim: %v, want ErrLeaseLost", err)
	}
	// And the store refuses the old token's write of the value (a writer
	// that does not know it was deposed).
	var st *fence.StaleTokenError
	if _, err := a.Write(ctx, name, l.Token(), []byte("late")); !errors.As(err, &st) || st.Token != l.Token() || st.LastAccepted != lb.Token() {
		t.Fatalf("the deposed leader's write of the value: %v, want STALE_TOKEN %d < %d", err, l.Token(), lb.Token())
	}
	if ld, _ := eb.Leader(ctx); ld.Token != lb.Token() || string(ld.Value) != "new" {
		t.Fatalf("leader after the late proclaim: %+v, want B with value new", ld)
	}
}

// Observe follows the leader as it changes: none, then A with its value,
// A's new value after a Proclaim, none after A resigns, then B — each
// leader's token larger than the last.
func TestElectionObserve(t *testing.T) {
	ctx := ctxFor(t)
	name := uniq(t)
	a, b, o := newClient(t), newClient(t), newClient(t)
	obs := o.Election(name).Observe(ctx)
	next := func(what string, ok func(client.Leader) bool) client.Leader {
		t.Helper()
		for ld := range obs {
			if ld.Err != nil {
				t.Fatalf("waiting for %s: %v", what, ld.Err)
			}
			if ok(ld) {
				return ld
			}
		}
		t.Fatalf("waiting for %s: observing ended", what)
		return client.Leader{}
	}
	next("no leader", func(ld client.Leader) bool { return ld.Token == 0 })
	ea := a.Election(name)
	la, err := ea.Campaign(ctx, []byte("a"), client.Owner("A"))
	if err != nil {
		t.Fatal(err)
	}
	next("A with value a", func(ld client.Leader) bool { return ld.Token == la.Token() && string(ld.Value) == "a" })
	if err := ea.Proclaim(ctx, []byte("a2")); err != nil {
		t.Fatal(err)
	}
	next("A's new value", func(ld client.Leader) bool { return ld.Token == la.Token() && string(ld.Value) == "a2" })
	if err := ea.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	next("no leader after A resigned", func(ld client.Leader) bool { return ld.Token == 0 })
	lb, err := b.Election(name).Campaign(ctx, []byte("b"), client.Owner("B"))
	if err != nil {
		t.Fatal(err)
	}
	ld := next("B", func(ld client.Leader) bool { return ld.Token == lb.Token() && string(ld.Value) == "b" })
	if ld.Token <= la.Token() || ld.Owner != "B" {
		t.Fatalf("B observed as %+v, want owner B and a token above A's %d", ld, la.Token())
	}
}
