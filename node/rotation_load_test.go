package node

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// Key rotation under load (G9): while workers acquire, renew and release
// without pause, the key is rotated and the old one retired. Every proof
// handed out verifies under the key set read right after it; proofs by the
// old key verify until it is dropped (the moment its last lease ends) and
// none after; proofs by the new key verify throughout.
func TestKeyRotationUnderLoad(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := context.Background()
	svc := n.Service()
	old := n.KeySet().Keys[0].ID

	type proof struct {
		st   fence.SignedToken
		name string
	}
	var (
		mu     sync.Mutex
		proofs []proof
		cycles atomic.Int64
		stop   = make(chan struct{})
		wg     sync.WaitGroup
	)
	// reached returns a channel closed once the workers have done at
	// least k more cycles than now.
	var wmu sync.Mutex
	var waits []struct {
		at int64
		c  chan struct{}
	}
	reached := func(k int64) chan struct{} {
		c := make(chan struct{})
		wmu.Lock()
		waits = append(waits, struct {
			at int64
			c  chan struct{}
		}{cycles.Load() + k, c})
		wmu.Unlock()
		return c
	}
	tick := func() {
		v := cycles.Add(1)
		wmu.Lock()
		kept := waits[:0]
		for _, w := range waits {
			if v >= w.at {
				close(w.c)
			} else {
				kept = append(kept, w)
			}
		}
		waits = kept
		wmu.Unlock()
	}
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("w%d-%d", w, i)
				g, err := svc.Acquire(ctx, fence.AcquireRequest{Name: name, Owner: "w", TTL: time.Minute})
				if err == nil {
					var r fence.Grant
					if r, err = svc.Renew(ctx, fence.RenewRequest{Name: name, Token: g.Lease.Token}); err == nil {
						for _, l := range []fence.Lease{g.Lease, r.Lease} {
							if verr := n.KeySet().Verify(l.Signed, name); verr != nil {
								err = fmt.Errorf("a proof handed out does not verify at once: %w", verr)
							}
							mu.Lock()
							proofs = append(proofs, proof{l.Signed, name})
							mu.Unlock()
						}
						_, err = svc.Release(ctx, fence.ReleaseRequest{Name: name, Token: g.Lease.Token})
					}
				}
				if err != nil {
					errs <- err
					return
				}
				tick()
			}
		}()
	}
	if !within(t, "workers before the rotation", func() { <-reached(20) }) {
		t.FailNow()
	}
	id, err := n.RotateKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !within(t, "workers after the rotation", func() { <-reached(20) }) {
		t.FailNow()
	}
	if _, err := n.RetireKey(ctx, old, false); err != nil {
		t.Fatal(err)
	}
	if !within(t, "workers after the retire", func() { <-reached(20) }) {
		t.FailNow()
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	final := n.KeySet()
	if len(final.Keys) != 1 || final.Keys[0].ID != id {
		t.Fatalf("key set after the old key's leases ended: %+v, want only %s", final.Keys, id)
	}
	var byOld, byNew int
	for _, p := range proofs {
		err := final.Verify(p.st, p.name)
		switch p.st.KeyID {
		case old:
			byOld++
			if err == nil {
				t.Fatalf("a proof by the dropped key still verifies: %s", p.st)
			}
		case id:
			byNew++
			if err != nil {
				t.Fatalf("a proof by the signing key: %v", err)
			}
		default:
			t.Fatalf("a proof by key %s, neither %s nor %s", p.st.KeyID, old, id)
		}
	}
	if byOld == 0 || byNew == 0 {
		t.Fatalf("%d proofs by the old key, %d by the new: the run did not straddle the rotation", byOld, byNew)
	}
}
