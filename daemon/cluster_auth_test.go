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
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/cluster/clusterapi"
	"github.com/fenceworks/fence/raftstore"
)

func withBearer[T any](m *T, secret string) *connect.Request[T] {
	r := connect.NewRequest(m)
	if secret != "" {
		r.Header().Set("Authorization", "Bearer "+secret)
	}
	return r
}

// Auth in a 3-node cluster: a follower authenticates from its own replica
// and forwards the principal to the leader over the peer port, so B cannot
// renew or release A's lease through a follower either; a principal header
// a client sets on the client port is ignored; a token revoked on the
// leader is refused by a follower once it has applied the revocation.
func TestClusterAuthFollowerForwardsPrincipalAndSeesRevocation(t *testing.T) {
	t.Parallel()
	ids := []string{"n1", "n2", "n3"}
	peers, addrs := staticPeers(t, ids)
	nodes := map[string]*runNode{}
	for _, id := range ids {
		nodes[id] = startRun(t, clusterConfig(t, id, ClusterConfig{RaftAddr: addrs[id], Peers: peers}))
	}
	var lead, fol *runNode
	await(t, "a leader in office and a ready follower", func() bool {
		lead, fol = nil, nil
		for _, id := range ids {
			st := nodes[id].status(t)
			switch {
			case st.GetRole() == "leader" && st.GetReady():
				lead = nodes[id]
			case st.GetReady():
				fol = nodes[id]
			}
		}
		return lead != nil && fol != nil
	})
	ctx := context.Background()
	authOf := func(n *runNode) fencev1connect.AuthServiceClient {
		return fencev1connect.NewAuthServiceClient(clusterHTTP, n.url)
	}
	// A follower does not bootstrap (its proposal would not be the
	// leader's): it answers unavailable, the leader serves.
	if _, err := authOf(fol).Bootstrap(ctx, connect.NewRequest(&fencev1.AuthBootstrapRequest{})); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("bootstrap on a follower: %v, want unavailable", err)
	}
	boot, err := authOf(lead).Bootstrap(ctx, connect.NewRequest(&fencev1.AuthBootstrapRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	admin := boot.Msg.GetSecret()
	if _, err := authOf(lead).GrantRole(ctx, withBearer(&fencev1.GrantRoleRequest{Role: "app", Permissions: []string{"lock:jobs/", "read:jobs/"}}, admin)); err != nil {
		t.Fatal(err)
	}
	token := func() (id, secret string) {
		res, err := authOf(lead).CreateToken(ctx, withBearer(&fencev1.CreateTokenRequest{Roles: []string{"app"}}, admin))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg.GetToken().GetId(), res.Msg.GetSecret()
	}
	aID, a := token()
	bID, b := token()
	if _, err := authOf(lead).SetEnabled(ctx, withBearer(&fencev1.AuthSetEnabledRequest{Enabled: true}, admin)); err != nil {
		t.Fatal(err)
	}
	locks := fencev1connect.NewLockServiceClient(clusterHTTP, fol.url)
	// The follower may not have applied the enable yet: it then serves
	// the call as before auth, so wait until it refuses no credentials.
	await(t, "the follower refuses a call without credentials", func() bool {
		_, err := locks.Get(ctx, connect.NewRequest(&fencev1.GetRequest{Name: "jobs/x"}))
		return connect.CodeOf(err) == connect.CodeUnauthenticated
	})
	var tok uint64
	await(t, "A acquires through the follower (it knows A's token once applied)", func() bool {
		g, err := locks.Acquire(ctx, withBearer(&fencev1.AcquireRequest{Name: "jobs/x", Owner: "a", Ttl: durationpb.New(time.Minute)}, a))
		if err != nil {
			return false
		}
		tok = g.Msg.GetLease().GetToken()
		return true
	})
	denied := func(what string, err error, want string) {
		t.Helper()
		var pd *fence.PermissionDeniedError
		if !errors.As(apierr.FromConnect(err), &pd) || pd.What != want || pd.Principal != "token:"+bID {
			t.Fatalf("%s: %v, want PERMISSION_DENIED on %s for token:%s", what, err, want, bID)
		}
	}
	_, err = locks.Renew(ctx, withBearer(&fencev1.RenewRequest{Name: "jobs/x", Token: tok}, b))
	denied("B renews A's lease through the follower", err, "lease")
	_, err = locks.Release(ctx, withBearer(&fencev1.ReleaseRequest{Name: "jobs/x", Token: tok}, b))
	denied("B releases A's lease through the follower", err, "lease")
	// A principal header set by a client on the client port is ignored:
	// B claiming to be A is still B.
	spoof := withBearer(&fencev1.RenewRequest{Name: "jobs/x", Token: tok}, b)
	spoof.Header().Set(clusterapi.PrincipalHeader, "token:"+aID)
	spoof.Header().Set(clusterapi.AdminHeader, "1")
	_, err = locks.Renew(ctx, spoof)
	denied("B renews with a spoofed principal header", err, "lease")
	if _, err := locks.Renew(ctx, withBearer(&fencev1.RenewRequest{Name: "jobs/x", Token: tok}, a)); err != nil {
		t.Fatalf("A renews through the follower: %v", err)
	}
	// A forwarded call that names no principal (what a follower that has
	// not yet applied the enable sends for any caller, as an anonymous
	// admin) is not served once the leader checks.
	peer := fencev1connect.NewLockServiceClient(clusterapi.PeerHTTPClient(raftstore.DialAPI), "http://"+lead.cfg.Cluster.RaftAddr)
	anon := connect.NewRequest(&fencev1.RenewRequest{Name: "jobs/x", Token: tok})
	anon.Header().Set(clusterapi.ForwardedHeader, "1")
	anon.Header().Set(clusterapi.PrincipalHeader, "")
	anon.Header().Set(clusterapi.AdminHeader, "1")
	if _, err := peer.Renew(ctx, anon); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("an anonymous admin forwarded to the leader with checking on: %v, want unauthenticated", err)
	}

	// Revoked on the leader, refused by the follower from its own replica.
	if _, err := authOf(lead).RevokeToken(ctx, withBearer(&fencev1.RevokeTokenRequest{Id: bID}, admin)); err != nil {
		t.Fatal(err)
	}
	await(t, "the follower refuses the revoked token", func() bool {
		_, err := locks.Get(ctx, withBearer(&fencev1.GetRequest{Name: "jobs/x"}, b))
		var un *fence.UnauthenticatedError
		return errors.As(apierr.FromConnect(err), &un) && un.Reason == "revoked token"
	})
}
