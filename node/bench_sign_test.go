package node

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

// BenchmarkGrantSigning measures what signed grants cost a node (issue
// 22): "sign" is the proof of one grant alone (the state's read lock, the
// lease's key, fence.Sign); "acquire-release/unsigned" is an acquire and a
// release through Node.Apply (no proof is made there), "signed" the same
// through the Service, whose grant reply carries the proof. One proposer:
// the difference is the signing on the reply path.
func BenchmarkGrantSigning(b *testing.B) {
	n, err := Open(Config{DataDir: b.TempDir(), Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	ctx := context.Background()
	b.Run("sign", func(b *testing.B) {
		res, err := n.Apply(ctx, state.Command{Op: state.OpAcquire, Name: "held", Owner: "b", TTL: time.Hour})
		if err != nil || res.Err != nil {
			b.Fatal(err, res.Err)
		}
		l := *res.Lease
		b.ReportAllocs()
		for b.Loop() {
			n.signLease(&l)
		}
		if !l.Signed.Signed() {
			b.Fatal("not signed")
		}
	})
	b.Run("acquire-release/unsigned", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			name := "u" + strconv.Itoa(i)
			res, err := n.Apply(ctx, state.Command{Op: state.OpAcquire, Name: name, Owner: "b", TTL: time.Minute})
			if err != nil || res.Err != nil {
				b.Fatal(err, res.Err)
			}
			if res, err := n.Apply(ctx, state.Command{Op: state.OpRelease, Name: name, Token: res.Lease.Token}); err != nil || res.Err != nil {
				b.Fatal(err, res.Err)
			}
		}
	})
	b.Run("acquire-release/signed", func(b *testing.B) {
		svc, i := n.Service(), 0
		for b.Loop() {
			i++
			name := "s" + strconv.Itoa(i)
			g, err := svc.Acquire(ctx, fence.AcquireRequest{Name: name, Owner: "b", TTL: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := svc.Release(ctx, fence.ReleaseRequest{Name: name, Token: g.Lease.Token}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
