package server

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// BenchmarkAcquireReleaseAuth is BenchmarkAcquireRelease at 64 clients
// with authentication off and on (a bearer token whose role has lock on
// the names, checked on every call from the node's replica), in the same
// run: the cost of authentication and permission checks on the hot path.
func BenchmarkAcquireReleaseAuth(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("auth=%t/clients=64", on), func(b *testing.B) {
			s, url := startServerOnNode(b, Config{})
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}
			defer hc.CloseIdleConnections()
			ctx := context.Background()
			var secret string
			if on {
				auth := fencev1connect.NewAuthServiceClient(hc, url)
				boot, err := auth.Bootstrap(ctx, connect.NewRequest(&fencev1.AuthBootstrapRequest{}))
				if err != nil {
					b.Fatal(err)
				}
				admin := boot.Msg.GetSecret()
				g := connect.NewRequest(&fencev1.GrantRoleRequest{Role: "bench", Permissions: []string{"lock:"}})
				g.Header().Set("Authorization", "Bearer "+admin)
				if _, err := auth.GrantRole(ctx, g); err != nil {
					b.Fatal(err)
				}
				c := connect.NewRequest(&fencev1.CreateTokenRequest{Roles: []string{"bench"}})
				c.Header().Set("Authorization", "Bearer "+admin)
				tok, err := auth.CreateToken(ctx, c)
				if err != nil {
					b.Fatal(err)
				}
				secret = tok.Msg.GetSecret()
				e := connect.NewRequest(&fencev1.AuthSetEnabledRequest{Enabled: true})
				e.Header().Set("Authorization", "Bearer "+admin)
				if _, err := auth.SetEnabled(ctx, e); err != nil {
					b.Fatal(err)
				}
			}
			lc := fencev1connect.NewLockServiceClient(hc, url)
			runCycles(b, s, 64, func() (cycle, error) {
				return func(name string) error {
					a := connect.NewRequest(&fencev1.AcquireRequest{Name: name, Owner: "bench", Ttl: durationpb.New(time.Minute)})
					if on {
						a.Header().Set("Authorization", "Bearer "+secret)
					}
					got, err := lc.Acquire(ctx, a)
					if err != nil {
						return err
					}
					r := connect.NewRequest(&fencev1.ReleaseRequest{Name: name, Token: got.Msg.Lease.Token})
					if on {
						r.Header().Set("Authorization", "Bearer "+secret)
					}
					_, err = lc.Release(ctx, r)
					return err
				}, nil
			})
		})
	}
}
