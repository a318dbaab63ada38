package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

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
