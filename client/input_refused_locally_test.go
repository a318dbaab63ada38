package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// TestNewRefusesBadURL: only http:// and https:// URLs with a host.
func TestNewRefusesBadURL(t *testing.T) {
	for _, u := range []string{"127.0.0.1:7420", "ftp://h:1", "http://", "https:///path", "://x", ""} {
		if _, err := client.New(u); err == nil || !strings.Contains(err.Error(), "want a URL like") {
			t.Errorf("New(%q) = %v, want a refusal", u, err)
		}
	}
	for _, u := range []string{"http://127.0.0.1:7420", "https://fence.example:443/base"} {
		if _, err := client.New(u); err != nil {
			t.Errorf("New(%q) = %v", u, err)
		}
	}
}

// TestReleaseRetryAfterLostReply: a Release whose reply was lost, retried
// and told NOT_HOLDER, was applied by its first attempt: it returns nil.
// A first attempt told NOT_HOLDER is a refusal.
func TestReleaseRetryAfterLostReply(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	direct := newClient(t)
	l, err := direct.Acquire(ctx, name, client.TTL(10*time.Second), client.KeepAlive(-1))
	if err != nil {
		t.Fatal(err)
	}
	if err := direct.Release(ctx, name, l.Token()+1000); !errors.Is(err, fence.ErrNotHolder) && !errors.Is(err, fence.ErrUnknownToken) {
		t.Fatalf("release with a token that does not hold the lock: %v, want a refusal", err)
	}
	proxy, url := newLossyProxy(t, serverURL, "Release")
	if err := newClientFor(t, url).Release(ctx, name, l.Token()); err != nil {
		t.Fatalf("release through a lossy proxy: %v, want nil (the first attempt released it)", err)
	}
	if proxy.count() != 2 {
		t.Fatalf("proxy saw %d Release attempts, want 2", proxy.count())
	}
	info, err := direct.Get(ctx, name)
	if err != nil || info.Lease != nil {
		t.Fatalf("lock after release: %+v %v, want free", info, err)
	}
	// Now, a first attempt told NOT_HOLDER (the lock is free) is a refusal.
	if err := direct.Release(ctx, name, l.Token()); !errors.Is(err, fence.ErrNotHolder) {
		t.Fatalf("second release: %v, want ErrNotHolder", err)
	}
}

// TestKeepAliveOption: KeepAlive(d) sets the renewal period: with a TTL of
// a minute (default period 20s), 10ms renewals arrive at once.
func TestKeepAliveOption(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	rec := &recorder{}
	c := newClientFor(t, serverURL, client.WithHTTPClient(&http.Client{Transport: rec}))
	l, err := c.Acquire(ctx, name, client.TTL(time.Minute), client.KeepAlive(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	guard := time.After(15 * time.Second) // a hang guard far below the default period (20s)
	for {
		n := 0
		for _, m := range rec.list() {
			if m == "Renew" {
				n++
			}
		}
		if n >= 3 {
			return
		}
		select {
		case <-guard:
			t.Fatalf("%d renewals in 15s with KeepAlive(10ms)", n)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestBadInputRefusedLocally: bad input is refused with *fence.InvalidError
// naming the field before anything is sent: the client here points at an
// address where nothing listens, so a request sent would fail otherwise.
func TestBadInputRefusedLocally(t *testing.T) {
	ln := listenLoopback(t)
	url := "http://" + ln.Addr().String()
	ln.Close()
	c := newClientFor(t, url, client.WithFailFast())
	ctx := ctxFor(t)
	calls := []struct {
		field string
		call  func() error
	}{
		{"name", func() error { return c.Release(ctx, "", 1) }},
		{"token", func() error { return c.Release(ctx, "x", 0) }},
		{"name", func() error { _, err := c.Renew(ctx, "", 1, 0); return err }},
		{"token", func() error { _, err := c.Renew(ctx, "x", 0, 0); return err }},
		{"ttl", func() error { _, err := c.Renew(ctx, "x", 1, time.Nanosecond); return err }},
		{"name", func() error { _, err := c.Get(ctx, ""); return err }},
		{"resource", func() error { _, err := c.Read(ctx, ""); return err }},
		{"resource", func() error { _, err := c.Delete(ctx, "", 1); return err }},
		{"token", func() error { _, err := c.Delete(ctx, "r", 0); return err }},
		{"op_id", func() error { _, err := c.Delete(ctx, "r", 1, client.OpID(strings.Repeat("x", 300))); return err }},
		{"token", func() error { _, err := c.Add(ctx, "r", 0, 1); return err }},
		{"page_size", func() error { _, _, err := c.ListPage(ctx, "", "", -1); return err }},
	}
	for i, tc := range calls {
		err := tc.call()
		var inv *fence.InvalidError
		if !errors.As(err, &inv) || inv.Field != tc.field {
			t.Errorf("call %d: %v, want *fence.InvalidError naming %s, refused before sending", i, err, tc.field)
		}
	}
}

// TestFailFastOnlyBeforeTheServerWasReached: once an attempt of the call
// reached a server, a later failure to connect is retried as usual (the
// server may be restarting), not reported as unreachable.
func TestFailFastOnlyBeforeTheServerWasReached(t *testing.T) {
	ln := listenLoopback(t)
	go func() {
		conn, err := ln.Accept()
		if err == nil {
			conn.Close() // the first attempt connects, and its reply is lost
		}
		ln.Close() // later attempts cannot connect
	}()
	c := newClientFor(t, "http://"+ln.Addr().String(), client.WithFailFast(), client.WithBackoff(10*time.Millisecond, 20*time.Millisecond))
	ctx, cancel := context.WithTimeout(ctxFor(t), 300*time.Millisecond)
	defer cancel()
	_, err := c.Read(ctx, "x")
	var un *client.UnreachableError
	if errors.As(err, &un) || ctx.Err() == nil {
		t.Fatalf("read: %v (ctx %v), want retries until the context ended", err, ctx.Err())
	}
}
