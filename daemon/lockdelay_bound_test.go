package daemon

import (
	"context"
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// A server with the default rules refuses a lock_delay above
// --max-lock-delay (1m, Consul's bound) naming the field and the bound, so
// one client's 10 ms lease cannot keep a lock BUSY for a day; one at the
// bound is granted and runs its lock-delay. (The attack: lockDelay "24h".)
func TestDefaultMaxLockDelayRefusesADayLongDelay(t *testing.T) {
	_, url := startServer(t)
	ctx := context.Background()
	for _, c := range protocols(url) {
		_, err := c.locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "held", Owner: "mallory",
			Ttl: durationpb.New(10 * time.Millisecond), LockDelay: durationpb.New(24 * time.Hour)}))
		checkInvalid(t, err, "lock_delay")
		var inv *fence.InvalidError
		if errors.As(apierr.FromConnect(err), &inv); inv.Bound != "at most 1m0s (the server's max_lock_delay)" {
			t.Fatalf("%s: bound %q, want the rule named", c.name, inv.Bound)
		}
		if li, err := c.locks.Get(ctx, connect.NewRequest(&fencev1.GetRequest{Name: "held"})); err != nil || li.Msg.GetLock().GetLastToken() != 0 {
			t.Fatalf("%s: after the refusal: %v %v, want nothing granted", c.name, li, err)
		}
		g, err := c.locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "at-bound", Owner: "alice",
			Ttl: durationpb.New(10 * time.Millisecond), LockDelay: durationpb.New(time.Minute)}))
		if err != nil || g.Msg.GetLease().GetToken() == 0 {
			t.Fatalf("%s: lock_delay 1m: %v", c.name, err)
		}
	}
}
