package servicetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/node"
)

// TestFollowerNodeServiceRefusesNothing: a follower's own node.Service
// proposes nothing and reads nothing from its own state; every call fails
// with an error that is unavailable (not a refusal) and says, as
// node.ErrNotLeader, that nothing was proposed, so the forwarder may send
// it to the leader. The leader then holds nothing of what was asked.
func TestFollowerNodeServiceRefusesNothing(t *testing.T) {
	t.Parallel() // on stores and clusters of its own
	leader, follower := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svc := follower.s.Node().Service()
	calls := map[string]func() error{
		"acquire": func() error {
			_, err := svc.Acquire(ctx, fence.AcquireRequest{Name: "f", Owner: "o", TTL: time.Minute})
			return err
		},
		"write": func() error {
			_, err := svc.Write(ctx, fence.WriteRequest{Resource: "f", Token: 1, Value: []byte("v")})
			return err
		},
		"open": func() error {
			_, err := svc.OpenSession(ctx, fence.OpenSessionRequest{TTL: time.Minute})
			return err
		},
		"get":  func() error { _, err := svc.Get(ctx, "f"); return err },
		"read": func() error { _, err := svc.Read(ctx, "f"); return err },
		"list": func() error { _, err := svc.List(ctx, fence.ListRequest{Limit: 10}); return err },
	}
	for name, call := range calls {
		err := call()
		if err == nil || fence.ReasonOf(err) != "" || !errors.Is(err, fence.ErrUnavailable) || !errors.Is(err, node.ErrNotLeader) {
			t.Errorf("%s on a follower's node.Service: %v, want unavailable and node.ErrNotLeader", name, err)
		}
	}
	li, err := leader.s.Node().Service().Get(ctx, "f")
	if err != nil || li.LastToken != 0 {
		t.Fatalf("the leader's lock f: %+v %v, want never granted", li, err)
	}
}
