package node

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// TestServiceRefusesBeforeProposing: the node judges each request by its
// Validate before proposing it, so a bad field is refused as the server
// refuses it (field and bound) and the log does not grow: the machine's
// own check, at apply time, is not what refuses it.
func TestServiceRefusesBeforeProposing(t *testing.T) {
	n := openNode(t, t.TempDir())
	svc := n.Service()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := svc.Acquire(ctx, fence.AcquireRequest{Name: "held", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", fence.MaxIDBytes+1)
	calls := []struct {
		field string
		call  func() error
	}{
		{"lock_delay", func() error {
			_, err := svc.Acquire(ctx, fence.AcquireRequest{Name: "a", TTL: time.Second, LockDelay: fence.MaxLockDelay + 1})
			return err
		}},
		{"wait", func() error {
			_, err := svc.Acquire(ctx, fence.AcquireRequest{Name: "a", TTL: time.Second, Wait: -1})
			return err
		}},
		{"ttl", func() error {
			_, err := svc.Acquire(ctx, fence.AcquireRequest{Name: "a", TTL: fence.DefaultMaxTTL + time.Second})
			return err
		}},
		{"owner", func() error {
			_, err := svc.Acquire(ctx, fence.AcquireRequest{Name: "a", Owner: strings.Repeat("o", fence.MaxOwnerBytes+1), TTL: time.Second})
			return err
		}},
		{"request_id", func() error {
			_, err := svc.Acquire(ctx, fence.AcquireRequest{Name: "a", TTL: time.Second, RequestID: long})
			return err
		}},
		{"ttl", func() error {
			_, err := svc.Renew(ctx, fence.RenewRequest{Name: "held", Token: g.Lease.Token, TTL: time.Millisecond})
			return err
		}},
		{"token", func() error { _, err := svc.Release(ctx, fence.ReleaseRequest{Name: "held"}); return err }},
		{"value", func() error {
			_, err := svc.Write(ctx, fence.WriteRequest{Resource: "r", Token: g.Lease.Token, Value: make([]byte, fence.MaxValueBytes+1)})
			return err
		}},
		{"op_id", func() error {
			_, err := svc.Add(ctx, fence.AddRequest{Resource: "r", Token: g.Lease.Token, OpID: long})
			return err
		}},
		{"resource", func() error { _, err := svc.Delete(ctx, fence.DeleteRequest{Token: g.Lease.Token}); return err }},
		{"ttl", func() error {
			_, err := svc.OpenSession(ctx, fence.OpenSessionRequest{TTL: fence.DefaultMaxTTL + time.Second})
			return err
		}},
		{"request_id", func() error {
			_, err := svc.OpenSession(ctx, fence.OpenSessionRequest{TTL: time.Second, RequestID: long})
			return err
		}},
		{"ttl", func() error {
			_, err := svc.KeepAlive(ctx, fence.KeepAliveRequest{ID: 99, TTL: time.Millisecond})
			return err
		}},
	}
	before := n.Status().AppliedIndex
	for i, c := range calls {
		err := c.call()
		var inv *fence.InvalidError
		if !errors.As(err, &inv) || inv.Field != c.field {
			t.Errorf("call %d: %v, want *fence.InvalidError naming %s", i, err, c.field)
		}
	}
	if after := n.Status().AppliedIndex; after != before {
		t.Errorf("applied index %d -> %d: a refused request was proposed", before, after)
	}
}
