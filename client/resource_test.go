package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// twoTokens returns two granted tokens, older < newer.
func twoTokens(t *testing.T, c *client.Client) (older, newer fence.Token) {
	t.Helper()
	ctx := ctxFor(t)
	a, err := c.Acquire(ctx, uniq(t)+"/a", client.TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Acquire(ctx, uniq(t)+"/b", client.TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return a.Token(), b.Token()
}

func TestWriteStaleTokenErrorsAs(t *testing.T) {
	ctx, res := ctxFor(t), uniq(t)
	c := newClient(t)
	older, newer := twoTokens(t, c)
	if _, err := c.Write(ctx, res, newer, []byte("8")); err != nil {
		t.Fatal(err)
	}
	_, err := c.Write(ctx, res, older, []byte("5"))
	if !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("write with older token: %v, want ErrStaleToken", err)
	}
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) || stale.Token != older || stale.LastAccepted != newer {
		t.Fatalf("errors.As stale = %+v (%v), want token %d last accepted %d", stale, err, older, newer)
	}
	r, err := c.Read(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Value) != "8" || r.LastToken != newer || r.Version != 1 {
		t.Fatalf("after stale write: %+v, want value 8 last_token %d version 1", r, newer)
	}
	// Equal tokens are accepted: the current owner may write again.
	if r, err = c.Write(ctx, res, newer, []byte("9")); err != nil || string(r.Value) != "9" || r.Version != 2 {
		t.Fatalf("write with the same token: %+v, %v", r, err)
	}
}

func TestWriteRetryAfterLostReplyReplays(t *testing.T) {
	ctx, res := ctxFor(t), uniq(t)
	proxy, url := newLossyProxy(t, serverURL, "Write")
	c := newClientFor(t, url)
	_, token := twoTokens(t, c)
	r, err := c.Write(ctx, res, token, []byte("8"))
	if err != nil {
		t.Fatalf("write through a lossy proxy: %v", err)
	}
	if proxy.count() != 2 {
		t.Fatalf("proxy saw %d Write attempts, want 2", proxy.count())
	}
	if !r.Replayed || r.Version != 1 || string(r.Value) != "8" {
		t.Fatalf("retried write = %+v, want the saved result (Replayed, version 1, value 8)", r)
	}
}

func TestWriteSameOpIDReplaysAndConflicts(t *testing.T) {
	ctx, res := ctxFor(t), uniq(t)
	c := newClient(t)
	_, token := twoTokens(t, c)
	op := client.OpID("op-" + res)
	first, err := c.Add(ctx, res, token, 5, op)
	if err != nil || first.Replayed || first.Int != 5 {
		t.Fatalf("first add = %+v, %v", first, err)
	}
	again, err := c.Add(ctx, res, token, 5, op)
	if err != nil || !again.Replayed || again.Int != 5 || again.Version != 1 {
		t.Fatalf("repeated op_id = %+v, %v; want replayed value 5 version 1", again, err)
	}
	_, err = c.Add(ctx, res, token, 7, op)
	var conflict *fence.OpConflictError
	if !errors.As(err, &conflict) || !errors.Is(err, fence.ErrOpConflict) {
		t.Fatalf("same op_id with another delta: %v, want *fence.OpConflictError", err)
	}
	sum, err := c.Add(ctx, res, token, -2)
	if err != nil || sum.Int != 3 {
		t.Fatalf("add -2 = %+v, %v; want 3", sum, err)
	}
}

func TestWriteInvalidInputTyped(t *testing.T) {
	ctx := ctxFor(t)
	c := newClient(t)
	cases := []struct {
		res   string
		token fence.Token
		value []byte
		field string
	}{
		{"", 1, nil, "resource"},
		{"r", 0, nil, "token"},
		{"r", 1, make([]byte, fence.MaxValueBytes+1), "value"},
	}
	for _, tc := range cases {
		_, err := c.Write(ctx, tc.res, tc.token, tc.value)
		var inv *fence.InvalidError
		if !errors.As(err, &inv) || inv.Field != tc.field {
			t.Errorf("write(%q, %d, %d bytes) = %v, want invalid %s", tc.res, tc.token, len(tc.value), err, tc.field)
		}
	}
	// An op_id that a protobuf string cannot carry is refused by name, not
	// as an internal marshalling error.
	var inv *fence.InvalidError
	if _, err := c.Write(ctx, "r", 1, nil, client.OpID("op\xff")); !errors.As(err, &inv) || inv.Field != "op_id" {
		t.Errorf("write with a non-UTF-8 op_id = %v, want invalid op_id", err)
	}
	// A token never issued is refused by the server.
	_, err := c.Write(ctx, uniq(t), 1<<50, []byte("x"))
	if !errors.Is(err, fence.ErrUnknownToken) {
		t.Errorf("write with a never-issued token = %v, want ErrUnknownToken", err)
	}
}

func TestProtocols(t *testing.T) {
	for _, p := range []struct {
		name string
		p    client.Protocol
	}{{"connect", client.ProtocolConnect}, {"grpc", client.ProtocolGRPC}, {"json", client.ProtocolConnectJSON}} {
		t.Run(p.name, func(t *testing.T) {
			ctx, name := ctxFor(t), uniq(t)
			c := newClient(t, client.WithProtocol(p.p))
			l, err := c.Acquire(ctx, name, client.TTL(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write(ctx, name, l.Token(), []byte{0xff, 0}); err != nil {
				t.Fatal(err)
			}
			r, err := c.Read(ctx, name)
			if err != nil || string(r.Value) != "\xff\x00" || r.LastToken != l.Token() {
				t.Fatalf("read = %+v, %v", r, err)
			}
			_, err = c.Acquire(ctx, name, client.TTL(5*time.Second))
			var busy *fence.BusyError
			if !errors.As(err, &busy) || busy.Token != l.Token() {
				t.Fatalf("busy over %s: %v", p.name, err)
			}
			locks, err := c.List(ctx, name)
			if err != nil || len(locks) != 1 || locks[0].Lease == nil || locks[0].Lease.Token != l.Token() {
				t.Fatalf("list = %+v, %v", locks, err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
