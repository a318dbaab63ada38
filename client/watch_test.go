package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// Watch follows a prefix: the state, then each change in log order.
func ExampleClient_Watch() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _ := client.New(serverURL)
	defer c.Close()

	events, err := c.Watch(ctx, "example-watch/")
	if err != nil {
		panic(err)
	}
	first := <-events
	fmt.Println("state first:", first.State != nil)

	l, _ := c.Acquire(ctx, "example-watch/job", client.TTL(time.Minute))
	_ = l.Release(ctx)
	for range 2 {
		e := <-events
		fmt.Println(e.Change.Kind, e.Change.Name, e.Change.Token == l.Token())
	}
	// Output:
	// state first: true
	// granted example-watch/job true
	// released example-watch/job true
}

// A watch whose connection breaks reconnects and resumes after the last
// position it received: every change comes once, none is missed.
func TestWatchResumesAfterAReconnect(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard
	defer cancel()
	p, url := newTCPProxy(t, serverURL)
	wc, err := client.New(url)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	c, err := client.New(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	events, err := wc.Watch(ctx, "resume/")
	if err != nil {
		t.Fatal(err)
	}
	if e := <-events; e.State == nil {
		t.Fatalf("first event %+v; want the state", e)
	}
	var want []string
	step := func() {
		l, err := c.Acquire(ctx, "resume/a", client.TTL(time.Minute), client.KeepAlive(-1))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Release(ctx, "resume/a", l.Token()); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("granted %d", l.Token()), fmt.Sprintf("released %d", l.Token()))
	}
	var got []string
	read := func(n int) {
		for len(got) < n {
			e, ok := <-events
			if !ok || e.Err != nil || e.State != nil {
				t.Fatalf("event %+v (open %v) after %v; want changes only", e, ok, got)
			}
			got = append(got, fmt.Sprintf("%s %d", e.Change.Kind, e.Change.Token))
		}
	}
	step()
	read(2)
	p.cut() // the watch's connection breaks
	step()  // changes while it is away
	step()
	read(6)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("changes %v; want %v", got, want)
	}
}

// A state of more locks than a page (the server sends at most 256 a page)
// comes out of Watch as one State with every lock, in name order, then the
// changes; a lock granted between the pages (after the watch began) is in
// the state or comes as a change after it, never both, never neither.
func TestWatchPutsTheStatesPagesTogether(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard
	defer cancel()
	c, err := client.New(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const sets = 10 // 640 locks: three pages
	for i := range sets {
		locks := make([]fence.LockSpec, 64)
		for j := range locks {
			locks[j] = fence.LockSpec{Name: fmt.Sprintf("pages/%02d/%02d", i, j)}
		}
		if _, err := c.AcquireSet(ctx, locks, client.TTL(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	events, err := c.Watch(ctx, "pages/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, "pages/99-late", client.TTL(time.Hour)); err != nil {
		t.Fatal(err)
	}
	e := <-events
	if e.Err != nil || e.State == nil {
		t.Fatalf("first event %+v; want the state", e)
	}
	late := 0
	for i, l := range e.State.Locks {
		if i > 0 && l.Name <= e.State.Locks[i-1].Name {
			t.Fatalf("lock %d %s after %s: not in name order", i, l.Name, e.State.Locks[i-1].Name)
		}
		if l.Name == "pages/99-late" {
			late++
		}
	}
	if n := len(e.State.Locks) - late; n != sets*64 {
		t.Fatalf("the state has %d of the %d locks", n, sets*64)
	}
	if late == 0 {
		if e := <-events; e.Change == nil || e.Change.Name != "pages/99-late" || e.Change.Kind != "granted" {
			t.Fatalf("the late grant not in the state, and next comes %+v", e)
		}
	}
	if _, err := c.Acquire(ctx, "pages/zz-mark", client.TTL(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if e := <-events; e.Change == nil || e.Change.Name != "pages/zz-mark" {
		t.Fatalf("after the state (and the late grant once): %+v; want the mark's grant", e)
	}
}
