package main

import (
	"context"
	"time"

	"github.com/fenceworks/fence/client"
)

// verifyHeld renews lease every TTL/3 until it ends, for run and hold.
//
// The lease is bound to the client's session, whose keepalive keeps it
// alive but does not look at it: a lease ended on the server behind the
// session's back (released with its token by `fence release`, say) would
// go unnoticed while the lock is granted to someone else. A renew of the
// lease checks it: a refusal ends the lease at once (Lease.Err is a
// *client.LostError), which makes run SIGKILL its child (G8) and hold
// report the loss. A renew that cannot reach the server is left to the
// session's safe deadline. The goroutine returns when the lease ends.
func verifyHeld(lease *client.Lease) {
	every := max(lease.TTL()/3, time.Millisecond)
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-lease.Done():
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), every)
			_ = lease.Renew(ctx)
			cancel()
		}
	}()
}
