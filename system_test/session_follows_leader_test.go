//go:build e2e

package system_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/client"
	"github.com/fenceworks/fence/testkit/harness"
)

// A session's stream follows the leader (docs/clients.md, "Which node a
// Client uses"), under authentication, for a principal that is not an
// admin: NodeStatus tells it which node leads (its role and readiness,
// nothing else), so its stream opens on the leader; after a leadership
// transfer the old leader's keepalive replies say it follows, and the
// Client moves the stream to the new leader — keeping its session, its
// lease and its token. Seen by the nodes themselves (fence_streams).
func TestSessionStreamFollowsTheLeader(t *testing.T) {
	t.Parallel()
	c := harness.StartClusterT(t, clusterConfig(3))
	leader := waitLeader(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*hangGuard)
	defer cancel()
	a, err := harness.EnableAuth(ctx, fenceBinary(t), c.Endpoints(), nil, "app", []string{"lock:jobs/"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes() {
		n.SetAuthToken(a.Admin) // the harness's own status and membership calls
	}
	// What a principal that is not an admin learns of each node.
	for _, n := range c.Nodes() {
		cs := fencev1connect.NewClusterServiceClient(&http.Client{Transport: bearer{a.Tokens[0], http.DefaultTransport}}, n.URL())
		var st *fencev1.NodeStatusResponse
		untilT(t, fmt.Sprintf("%s answers the app principal's NodeStatus", n.ID()), func() bool {
			res, err := cs.NodeStatus(ctx, connect.NewRequest(&fencev1.NodeStatusRequest{}))
			if err != nil {
				return false
			}
			st = res.Msg
			return true
		})
		if st.GetRole() == "" || st.GetId() != "" || st.GetRaftAddr() != "" || st.GetLeaderAddr() != "" || st.GetTerm() != 0 || st.GetClusterId() != "" {
			t.Fatalf("%s: NodeStatus for a principal that is not an admin: %v, want its role and readiness only", n.ID(), st)
		}
	}
	// Every node applied the enable before the Client starts (a node that
	// has not yet would answer it as an anonymous admin).
	for _, n := range c.Nodes() {
		cs := fencev1connect.NewClusterServiceClient(http.DefaultClient, n.URL())
		untilT(t, n.ID()+" refuses a call without credentials", func() bool {
			_, err := cs.NodeStatus(ctx, connect.NewRequest(&fencev1.NodeStatusRequest{}))
			return connect.CodeOf(err) == connect.CodeUnauthenticated
		})
	}

	cl, err := client.New(c.Endpoints(), client.WithBearerToken(a.Tokens[0]), client.WithSessionTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	l, err := cl.Acquire(ctx, "jobs/x")
	if err != nil {
		t.Fatal(err)
	}
	session, token := cl.SessionID(), l.Token()
	awaitStreamOn(t, c, leader)

	var next *harness.Server
	for _, n := range c.Nodes() {
		if n != leader {
			next = n
			break
		}
	}
	if _, err := c.Transfer(ctx, next); err != nil {
		t.Fatal(err)
	}
	awaitStreamOn(t, c, next)
	if err := l.Renew(ctx); err != nil {
		t.Fatalf("renew after the move: %v", err)
	}
	if got := cl.SessionID(); got != session {
		t.Fatalf("session %d after the move, want %d", got, session)
	}
	if l.Token() != token {
		t.Fatalf("token %d after the move, want %d", l.Token(), token)
	}
	// The lease is the session's still: a second Client of the same
	// principal is refused the lock.
	other, err := client.New(c.Endpoints(), client.WithBearerToken(a.Tokens[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Acquire(ctx, "jobs/x"); !errors.Is(err, fence.ErrBusy) {
		t.Fatalf("a second Client's acquire of jobs/x while the moved session holds it: %v, want ErrBusy", err)
	}
}

// awaitStreamOn waits until node holds the one session stream of the
// cluster and no other node holds one.
func awaitStreamOn(t *testing.T, c *harness.Cluster, node *harness.Server) {
	t.Helper()
	var counts []string
	untilT(t, "the session stream on "+node.ID(), func() bool {
		counts = counts[:0]
		ok := true
		for _, n := range c.Nodes() {
			k := streamsOpen(t, n.URL())
			counts = append(counts, fmt.Sprintf("%s=%d", n.ID(), k))
			want := 0
			if n == node {
				want = 1
			}
			ok = ok && k == want
		}
		return ok
	})
	t.Logf("session streams per node: %s", strings.Join(counts, " "))
}
