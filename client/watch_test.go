package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

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
