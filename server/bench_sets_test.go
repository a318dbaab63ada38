package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// BenchmarkOrderSKUs measures an order that changes 3 of 64 SKUs (so
// concurrent orders overlap), each SKU a lock, at 16 and 64 clients
// (docs/benchmarks.md, issue 23): as one set — one Acquire with the three
// locks and a wait, one Release — against one by one in name order (the
// order that avoids deadlock without sets: three waiting Acquires, three
// Releases). Each cycle is one order; p50/p99 are per order.
func BenchmarkOrderSKUs(b *testing.B) {
	for _, clients := range []int{16, 64} {
		for _, mode := range []string{"set", "one-by-one"} {
			b.Run(fmt.Sprintf("clients=%d/%s", clients, mode), func(b *testing.B) {
				s, url := startServerOnNode(b, Config{})
				hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}}
				defer hc.CloseIdleConnections()
				lc := fencev1connect.NewLockServiceClient(hc, url)
				var seed atomic.Uint64
				runCycles(b, s, clients, func() (cycle, error) {
					rng := rand.New(rand.NewPCG(seed.Add(1), 3))
					ctx := context.Background()
					ttl, wait := durationpb.New(time.Minute), durationpb.New(time.Minute)
					return func(string) error {
						var skus []string
						for _, k := range rng.Perm(64)[:3] {
							skus = append(skus, fmt.Sprintf("sku/%02d", k))
						}
						slices.Sort(skus)
						if mode == "set" {
							req := &fencev1.AcquireRequest{Owner: "bench", Ttl: ttl, Wait: wait}
							for _, n := range skus {
								req.Locks = append(req.Locks, &fencev1.LockSpec{Name: n})
							}
							a, err := lc.Acquire(ctx, connect.NewRequest(req))
							if err != nil {
								return err
							}
							_, err = lc.Release(ctx, connect.NewRequest(&fencev1.ReleaseRequest{Name: skus[0], Token: a.Msg.Lease.Token}))
							return err
						}
						var toks []uint64
						for _, n := range skus {
							a, err := lc.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: n, Owner: "bench", Ttl: ttl, Wait: wait}))
							if err != nil {
								return err
							}
							toks = append(toks, a.Msg.Lease.Token)
						}
						for i, n := range skus {
							if _, err := lc.Release(ctx, connect.NewRequest(&fencev1.ReleaseRequest{Name: n, Token: toks[i]})); err != nil {
								return err
							}
						}
						return nil
					}, nil
				})
			})
		}
	}
}
