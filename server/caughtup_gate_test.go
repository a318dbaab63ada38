package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/state"
)

// behindAuth is an AuthStore whose node has not caught up with its
// cluster until caught is set.
type behindAuth struct {
	memAuth
	caught *atomic.Bool
}

func (a behindAuth) CaughtUp() error {
	if a.caught.Load() {
		return nil
	}
	return fmt.Errorf("%w: not caught up", fence.ErrUnavailable)
}

// A node that has not caught up with its cluster since it started may not
// know that authentication is on (its replica says off until it applies
// the enable): it serves no call but its status view, whatever its
// replica says; once caught up it serves by the auth state it holds.
func TestNotCaughtUpServesNothingButStatus(t *testing.T) {
	caught := new(atomic.Bool)
	_, url := startServerDeps(t, Config{}, func(d *Deps) {
		d.Auth = behindAuth{memAuth: d.Auth.(memAuth), caught: caught}
	})
	ctx := context.Background()
	backup := func() error {
		s, err := fencev1connect.NewMaintenanceServiceClient(http.DefaultClient, url).Backup(ctx, connect.NewRequest(&fencev1.BackupRequest{}))
		if err != nil {
			return err
		}
		defer s.Close()
		for s.Receive() {
		}
		return s.Err()
	}
	locks := fencev1connect.NewLockServiceClient(http.DefaultClient, url)
	cl := fencev1connect.NewClusterServiceClient(http.DefaultClient, url)
	unavailable := func(what string, err error) {
		t.Helper()
		if connect.CodeOf(err) != connect.CodeUnavailable {
			t.Fatalf("%s on a node not caught up: %v, want unavailable", what, err)
		}
	}
	unavailable("Backup", backup())
	_, err := locks.Get(ctx, connect.NewRequest(&fencev1.GetRequest{Name: "x"}))
	unavailable("Get", err)
	_, err = locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "x", Owner: "o", Ttl: durationpb.New(time.Minute)}))
	unavailable("Acquire", err)
	_, err = fencev1connect.NewAuthServiceClient(http.DefaultClient, url).CreateToken(ctx, connect.NewRequest(&fencev1.CreateTokenRequest{Roles: []string{"admin"}}))
	unavailable("CreateToken", err)
	// (Bootstrap is not gated: the state judges it at its place in the
	// log, where an earlier bootstrap is always known.)
	if _, err := cl.NodeStatus(ctx, connect.NewRequest(&fencev1.NodeStatusRequest{})); err != nil {
		t.Fatalf("NodeStatus on a node not caught up: %v, want served", err)
	}
	if _, err := cl.Members(ctx, connect.NewRequest(&fencev1.MembersRequest{})); err != nil {
		t.Fatalf("Members on a node not caught up: %v, want served", err)
	}
	// Not the operator's cluster overview: it lists every member's id
	// and raft address, judged as an admin's by a replica that may not
	// know authentication is on (an outside attack read it anonymously).
	_, err = fencev1connect.NewOperatorServiceClient(http.DefaultClient, url).ClusterOverview(ctx, connect.NewRequest(&fencev1.ClusterOverviewRequest{}))
	unavailable("ClusterOverview", err)

	// Nor its key set: that of its last snapshot may still hold a key
	// retired --now since (a leak).
	keysStatus := func() int {
		res, err := http.Get(url + "/v1/keys")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := keysStatus(); code != http.StatusServiceUnavailable {
		t.Fatalf("GET /v1/keys on a node not caught up: %d, want 503", code)
	}
	_, err = fencev1connect.NewKeyServiceClient(http.DefaultClient, url).ListKeys(ctx, connect.NewRequest(&fencev1.ListKeysRequest{}))
	unavailable("ListKeys", err)

	caught.Store(true)
	if err := backup(); err != nil {
		t.Fatalf("Backup once caught up (authentication off): %v", err)
	}
	if code := keysStatus(); code != http.StatusOK {
		t.Fatalf("GET /v1/keys once caught up: %d, want 200", code)
	}
	if _, err := locks.Get(ctx, connect.NewRequest(&fencev1.GetRequest{Name: "x"})); err != nil {
		t.Fatalf("Get once caught up: %v", err)
	}
}

// Through the peer port too, a node that has not caught up answers only
// its own status: its configuration may still list a member removed while
// it was down (an outside test was served as a removed member, as an
// admin, for seconds after such a node restarted).
func TestNotCaughtUpPeerPortServesOnlyNodeStatus(t *testing.T) {
	caught := new(atomic.Bool)
	s, err := newOverFakeWith(t, Config{}, state.Config{}, func(d *Deps) {
		d.Auth = behindAuth{memAuth: d.Auth.(memAuth), caught: caught}
		d.PeerAdmitted = func(id string) bool { return id == "n2" }
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.ServePeers(certListener{ln, "n2"})
	t.Cleanup(func() { s.Close() })
	url := "http://" + ln.Addr().String()
	ctx := context.Background()
	backup := func() error { return peerBackup(ctx, url) }
	if err := backup(); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("a peer's backup from a node not caught up: %v, want unavailable", err)
	}
	if _, err := fencev1connect.NewClusterServiceClient(&http.Client{}, url).NodeStatus(ctx, connect.NewRequest(&fencev1.NodeStatusRequest{})); err != nil {
		t.Fatalf("a peer's NodeStatus on a node not caught up: %v, want served", err)
	}
	caught.Store(true)
	if err := backup(); err != nil {
		t.Fatalf("a peer's backup once caught up: %v", err)
	}
}

// notReadyNode is a node that is not ready now (cut off: a removed or
// paused member), though it caught up once.
type notReadyNode struct{ memNode }

func (notReadyNode) Readiness() (bool, string) { return false, "leader=false" }

// A node that caught up once but is not ready now does not publish its key
// set: it may still list a key retired --now since (outside attack: a
// removed member served its old key set indefinitely).
func TestKeySetNotServedWhenNotReady(t *testing.T) {
	_, url := startServerDeps(t, Config{}, func(d *Deps) { d.Node = notReadyNode{d.Node.(memNode)} })
	res, err := http.Get(url + "/v1/keys")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("GET /v1/keys on a node not ready: %d, want 503", res.StatusCode)
	}
	_, err = fencev1connect.NewKeyServiceClient(http.DefaultClient, url).ListKeys(context.Background(), connect.NewRequest(&fencev1.ListKeysRequest{}))
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("ListKeys on a node not ready: %v, want unavailable", err)
	}
}
