package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// With RequireSignedWrites the built-in store takes a write only with the
// lease's signed token: a bare token — another principal's, read with
// read permission, or made up — is refused FORGED_TOKEN and nothing is
// proposed; the holder's signed write is accepted. Without it, a bare
// token is compared as before.
func TestRequireSignedWrites(t *testing.T) {
	n, err := Open(Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RequireSignedWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { within(t, "close", func() { n.Close() }) })
	svc, ctx := n.Service(), context.Background()
	g, err := svc.Acquire(ctx, fence.AcquireRequest{Name: "stock", Owner: "a", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.Write(ctx, fence.WriteRequest{Resource: "stock", Token: g.Lease.Token, Value: []byte("bare")})
	if !errors.Is(err, fence.ErrForgedToken) {
		t.Fatalf("a bare-token write with signed writes required: %v, want FORGED_TOKEN", err)
	}
	if st, err := svc.Read(ctx, "stock"); err != nil || st.Version != 0 {
		t.Fatalf("after the refused write: %+v, %v; want nothing written", st, err)
	}
	w, err := svc.Write(ctx, fence.WriteRequest{Resource: "stock", Token: g.Lease.Token, Signed: g.Lease.Signed, Value: []byte("signed")})
	if err != nil || w.State.Version != 1 {
		t.Fatalf("the holder's signed write: %+v, %v", w, err)
	}

	// The default: a bare token is compared as before.
	plain := openNode(t, t.TempDir())
	g2, err := plain.Service().Acquire(ctx, fence.AcquireRequest{Name: "stock", Owner: "a", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Service().Write(ctx, fence.WriteRequest{Resource: "stock", Token: g2.Lease.Token, Value: []byte("bare")}); err != nil {
		t.Fatalf("a bare-token write by default: %v", err)
	}
}
