package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// TestServiceReleaseRefusedIsTyped: the remote Service's Release passes the
// server's refusal on as the typed error: a token that no longer holds the
// lock is refused with ErrNotHolder (or ErrLeaseExpired), not reported as
// released.
//
// Kills the negation mutant of service.go's Release `err != nil`: it reads
// the reply of a refused call (nil) and panics.
func TestServiceReleaseRefusedIsTyped(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	svc := client.NewService(serverURL)
	g, err := svc.Acquire(ctx, fence.AcquireRequest{Name: name, Owner: "a", TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Release(ctx, fence.ReleaseRequest{Name: name, Token: g.Lease.Token}); err != nil {
		t.Fatal(err)
	}
	_, err = svc.Release(ctx, fence.ReleaseRequest{Name: name, Token: g.Lease.Token})
	if !errors.Is(err, fence.ErrNotHolder) && !errors.Is(err, fence.ErrLeaseExpired) {
		t.Fatalf("second release = %v, want ErrNotHolder or ErrLeaseExpired", err)
	}
}

// TestServiceListPageOfOne: a List with Limit 1 (the smallest allowed) reads
// one lock per page and pages through all of them.
//
// Kills the boundary mutant of service.go's `req.Limit < 1` (`<= 1`), which
// refuses Limit 1 as invalid.
func TestServiceListPageOfOne(t *testing.T) {
	ctx, prefix := ctxFor(t), uniq(t)+"/"
	svc := client.NewService(serverURL)
	for _, n := range []string{"a", "b"} {
		if _, err := svc.Acquire(ctx, fence.AcquireRequest{Name: prefix + n, Owner: "o", TTL: 10 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	p1, err := svc.List(ctx, fence.ListRequest{Prefix: prefix, Limit: 1})
	if err != nil || len(p1.Locks) != 1 || p1.Locks[0].Name != prefix+"a" || p1.Next == "" {
		t.Fatalf("page 1 of 1 lock = %+v, %v", p1, err)
	}
	p2, err := svc.List(ctx, fence.ListRequest{Prefix: prefix, After: p1.Next, Limit: 1})
	if err != nil || len(p2.Locks) != 1 || p2.Locks[0].Name != prefix+"b" {
		t.Fatalf("page 2 of 1 lock = %+v, %v", p2, err)
	}
}
