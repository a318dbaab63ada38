package client_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// The paused-worker story (docs/story.md) in Go: worker A's lease runs out while it is paused,
// worker B takes over and writes, and A's late write is refused by the
// fenced store. (serverURL is the test's embedded server; yours would be
// "http://127.0.0.1:7420".)
func Example() {
	ctx := context.Background()
	c, err := client.New(serverURL)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	// A holds the lock for 100ms and then stalls: no keepalive.
	a, err := c.Acquire(ctx, "example/sku-42", client.TTL(100*time.Millisecond), client.Owner("worker-a"), client.KeepAlive(-1))
	if err != nil {
		panic(err)
	}
	<-a.Done() // A's client learns the lease is lost by its safe deadline...

	// ...and B, queued until the server expires A's lease, takes over with a
	// newer token and writes.
	b, err := c.Acquire(ctx, "example/sku-42", client.TTL(5*time.Second), client.Owner("worker-b"), client.Wait(5*time.Second))
	if err != nil {
		panic(err)
	}
	defer b.Release(ctx)
	fmt.Println("B's token is newer:", b.Token() > a.Token())
	if _, err := c.Write(ctx, "example/stock/sku-42", b.Token(), []byte("8")); err != nil {
		panic(err)
	}

	// A wakes up and tries its write anyway: refused.
	_, err = c.Write(ctx, "example/stock/sku-42", a.Token(), []byte("5"))
	fmt.Println("A refused as stale:", errors.Is(err, fence.ErrStaleToken))

	r, _ := c.Read(ctx, "example/stock/sku-42")
	fmt.Printf("stock=%s, last token is B's: %v\n", r.Value, r.LastToken == b.Token())
	// Output:
	// B's token is newer: true
	// A refused as stale: true
	// stock=8, last token is B's: true
}

// A try-acquire of a held lock is refused with the holder's facts.
func ExampleClient_Acquire_busy() {
	ctx := context.Background()
	c, _ := client.New(serverURL)
	defer c.Close()
	held, _ := c.Acquire(ctx, "example/busy", client.TTL(5*time.Second), client.Owner("worker-a"))
	defer held.Release(ctx)

	_, err := c.Acquire(ctx, "example/busy", client.Owner("worker-b"))
	var busy *fence.BusyError
	if errors.As(err, &busy) {
		fmt.Printf("busy: held by %s, holder's token is ours: %v\n", busy.Holder, busy.Token == held.Token())
	}
	// Output:
	// busy: held by worker-a, holder's token is ours: true
}

// Work as the owner bounded by the lease's context: it is canceled when the
// lease is lost or released.
func ExampleLease_Context() {
	ctx := context.Background()
	c, _ := client.New(serverURL)
	defer c.Close()
	l, err := c.Acquire(ctx, "example/context", client.TTL(5*time.Second))
	if err != nil {
		panic(err)
	}
	_, err = c.Add(l.Context(), "example/counter", l.Token(), 1)
	fmt.Println("added while held:", err == nil)

	l.Release(ctx)
	<-l.Context().Done()
	fmt.Println("after release:", context.Cause(l.Context()))
	// Output:
	// added while held: true
	// after release: fence: lease released
}

// A write retried with the same op_id is applied once; the repeat returns
// the saved result.
func ExampleOpID() {
	ctx := context.Background()
	c, _ := client.New(serverURL)
	defer c.Close()
	l, _ := c.Acquire(ctx, "example/opid", client.TTL(5*time.Second))
	defer l.Release(ctx)

	first, _ := c.Add(ctx, "example/opid-counter", l.Token(), 10, client.OpID("refund-7731"))
	again, _ := c.Add(ctx, "example/opid-counter", l.Token(), 10, client.OpID("refund-7731"))
	fmt.Println(first.Int, first.Replayed)
	fmt.Println(again.Int, again.Replayed)
	// Output:
	// 10 false
	// 10 true
}

// Leases acquired without a TTL are bound to the Client's session: one
// keepalive, over one stream, keeps them all, and they all end together if
// it fails. Release frees one; Close closes the session and frees the rest.
func ExampleClient_Acquire_session() {
	ctx := context.Background()
	c, err := client.New(serverURL, client.WithSessionTTL(5*time.Second))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	a, err := c.Acquire(ctx, "example/session/a")
	if err != nil {
		panic(err)
	}
	b, err := c.Acquire(ctx, "example/session/b")
	if err != nil {
		panic(err)
	}
	fmt.Println("session open:", c.SessionID() != 0, "TTL:", a.TTL())
	fmt.Println("same deadline:", a.Deadline().Equal(b.Deadline()))

	// Writes go over the session's stream too, fenced as always.
	r, _ := c.Add(ctx, "example/session/counter", a.Token(), 1)
	fmt.Println("counter:", r.Int)

	b.Release(ctx)
	<-b.Done()
	fmt.Println("b:", b.Err(), "- a held:", a.Err() == nil)
	// Output:
	// session open: true TTL: 5s
	// same deadline: true
	// counter: 1
	// b: fence: lease released - a held: true
}

// An order's SKUs taken as one set: all at once or none, one lease and one
// token for every name, in any order (no two workers listing them in other
// orders can deadlock). The catalog is held shared, so other orders' sets
// run beside this one while a full import (catalog exclusive) waits. A
// guard of one SKU's stock gets that SKU's proof.
func ExampleClient_AcquireSet() {
	ctx := context.Background()
	c, _ := client.New(serverURL)
	defer c.Close()
	set, err := c.AcquireSet(ctx, []fence.LockSpec{
		{Name: "example/sku/7"},
		{Name: "example/catalog", Mode: fence.Shared},
		{Name: "example/sku/3"},
	}, client.TTL(5*time.Second), client.Wait(5*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer set.Release(ctx)
	for _, l := range set.Locks() {
		fmt.Println(l.Name, l.Mode)
	}
	fmt.Println("one proof per lock:", len(set.Proofs()) == len(set.Locks()))
	fmt.Println("sku/3's proof is of the set's token:", set.ProofFor("example/sku/3").Token == set.Token())
	// Output:
	// example/catalog shared
	// example/sku/3 exclusive
	// example/sku/7 exclusive
	// one proof per lock: true
	// sku/3's proof is of the set's token: true
}

// Shared holders hold a lock together, each with its own token; an
// exclusive request waits for all of them. Permits(n) makes a lock a
// semaphore: at most n holders.
func ExampleShared() {
	ctx := context.Background()
	c, _ := client.New(serverURL)
	defer c.Close()
	r1, err := c.Acquire(ctx, "example/report", client.Shared(), client.TTL(5*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r1.Release(ctx)
	r2, err := c.Acquire(ctx, "example/report", client.Shared(), client.TTL(5*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r2.Release(ctx)
	fmt.Println("both shared, newer token:", r1.Mode() == fence.Shared && r2.Token() > r1.Token())

	_, err = c.Acquire(ctx, "example/report", client.TTL(5*time.Second))
	fmt.Println("an exclusive try is busy:", errors.Is(err, fence.ErrBusy))

	info, _ := c.Get(ctx, "example/report")
	fmt.Println("holders:", len(info.Holders))

	x1, err := c.Acquire(ctx, "example/exchange", client.Permits(2), client.TTL(5*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x1.Release(ctx)
	_, err = c.Acquire(ctx, "example/exchange", client.Permits(3), client.TTL(5*time.Second))
	var mismatch *fence.PermitsMismatchError
	fmt.Println("another permit count:", errors.As(err, &mismatch) && mismatch.Current == 2)
	// Output:
	// both shared, newer token: true
	// an exclusive try is busy: true
	// holders: 2
	// another permit count: true
}

// Leader election: the first campaigner leads and proclaims its address; a
// second one waits until the leader resigns, then leads with a larger
// token.
func ExampleElection() {
	ctx := context.Background()
	c, err := client.New(serverURL)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	e := c.Election("example/db-primary")
	first, err := e.Campaign(ctx, []byte("10.0.0.1:5432"), client.Owner("node-1"))
	if err != nil {
		panic(err)
	}
	ld, err := e.Leader(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("leader %s at %s\n", ld.Owner, ld.Value)

	won := make(chan fence.Token)
	go func() {
		l, err := c.Election("example/db-primary").Campaign(ctx, []byte("10.0.0.2:5432"), client.Owner("node-2"))
		if err != nil {
			panic(err)
		}
		won <- l.Token()
	}()
	for li, _ := c.Get(ctx, "example/db-primary"); li.Waiters == 0; li, _ = c.Get(ctx, "example/db-primary") {
		time.Sleep(5 * time.Millisecond) // node-2 is campaigning
	}
	if err := e.Resign(ctx); err != nil {
		panic(err)
	}
	fmt.Println("node-2 leads with a larger token:", <-won > first.Token())
	// Output:
	// leader node-1 at 10.0.0.1:5432
	// node-2 leads with a larger token: true
}
