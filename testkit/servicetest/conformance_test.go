package servicetest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/fenceworks/fence/client"
	"github.com/fenceworks/fence/daemon"
	"github.com/fenceworks/fence/node"
	"github.com/fenceworks/fence/testkit/memservice"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// rules are the rules of every store the table runs against: those of
// `fence serve` without flags (daemon.DefaultConfig), which the table's
// bounds are written for.
var rules = daemon.DefaultConfig().Rules

// localTarget is a node on a fresh data dir, as node.Node.Service.
func localTarget(t *testing.T) Target {
	n, err := node.Open(node.Config{DataDir: t.TempDir(), Logger: quiet, Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return Target{Service: n.Service(), Stop: func() { n.Close() }}
}

// remoteTarget is a real server on a loopback socket, through
// client.NewService.
func remoteTarget(t *testing.T) Target {
	s, err := daemon.New(daemon.Config{DataDir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	stop := func() {
		s.Shutdown(context.Background())
		<-served
	}
	var once bool
	t.Cleanup(func() {
		if !once {
			stop()
		}
	})
	svc := client.NewService("http://" + ln.Addr().String())
	return Target{Service: svc, Stop: func() { once = true; stop() }}
}

// forwardedTarget is a follower of a real three-node cluster (static
// peers, real raft over loopback TCP), through client.NewService: every
// call is forwarded by the follower's cluster.Forwarder to the leader over
// the raft port. Stop shuts the follower down.
func forwardedTarget(t *testing.T) Target {
	_, follower := startCluster(t)
	return Target{Service: client.NewService(follower.url), Stop: follower.stop}
}

// TestConformance runs the table against the local node and against the
// remote client over a real server, and checks that the two answered
// every call alike.
func TestConformance(t *testing.T) {
	t.Parallel() // on stores and clusters of its own
	var local, remote []Outcome
	t.Run("local node", func(t *testing.T) { local = Run(t, localTarget(t)) })
	t.Run("remote client", func(t *testing.T) { remote = Run(t, remoteTarget(t)) })
	Compare(t, "local node", local, "remote client", remote)
}

// TestConformanceForwarded runs the table through a follower of a
// three-node cluster (the leader forwarder, over the raft port), and
// checks that it answered every call as the local node does.
func TestConformanceForwarded(t *testing.T) {
	t.Parallel() // on stores and clusters of its own
	var local, forwarded []Outcome
	t.Run("local node", func(t *testing.T) { local = Run(t, localTarget(t)) })
	t.Run("forwarded by a follower", func(t *testing.T) { forwarded = Run(t, forwardedTarget(t)) })
	Compare(t, "local node", local, "forwarded by a follower", forwarded)
}

// TestConformanceForwarderInProcess runs the table on a follower's
// cluster.Forwarder itself (Server.Service, no client in front of it),
// and checks that it answered every call as the local node does.
func TestConformanceForwarderInProcess(t *testing.T) {
	t.Parallel() // on stores and clusters of its own
	var local, fwd []Outcome
	t.Run("local node", func(t *testing.T) { local = Run(t, localTarget(t)) })
	t.Run("follower's forwarder", func(t *testing.T) {
		_, follower := startCluster(t)
		fwd = Run(t, Target{Service: follower.s.Service(), Stop: follower.stop})
	})
	Compare(t, "local node", local, "follower's forwarder", fwd)
}

// TestConformanceLeaderAndFollower runs the table through the leader of a
// three-node cluster and through a follower of another (each on a fresh
// store, so tokens and ids match), both over the client port, and checks
// that every answer is the same, field by field: which node a client asks
// does not change what it is told.
func TestConformanceLeaderAndFollower(t *testing.T) {
	t.Parallel() // on stores and clusters of its own
	var viaLeader, viaFollower []Outcome
	t.Run("leader", func(t *testing.T) {
		leader, _ := startCluster(t)
		viaLeader = Run(t, Target{Service: client.NewService(leader.url), Stop: leader.stop})
	})
	t.Run("follower", func(t *testing.T) {
		_, follower := startCluster(t)
		viaFollower = Run(t, Target{Service: client.NewService(follower.url), Stop: follower.stop})
	})
	Compare(t, "leader", viaLeader, "follower", viaFollower)
}

// TestConformanceInMemory runs the table against testkit/memservice (the
// in-memory service the server's handler tests run over) and checks that
// it answered every call as the local node does: the fake holds the
// contract it stands in for.
func TestConformanceInMemory(t *testing.T) {
	t.Parallel() // on stores and clusters of its own
	var local, mem []Outcome
	t.Run("local node", func(t *testing.T) { local = Run(t, localTarget(t)) })
	t.Run("in memory", func(t *testing.T) {
		s := memservice.New(memservice.Config{Rules: rules})
		t.Cleanup(func() { s.Close() })
		mem = Run(t, Target{Service: s, Stop: func() { s.Close() }})
	})
	Compare(t, "local node", local, "in memory", mem)
}

// TestConformanceLockBoundaries runs the lock-boundary table against the
// local node, the remote client over a real server, a follower of a
// three-node cluster and testkit/memservice, and checks that all answered
// every call alike (needs the state's sets, modes and permits).
func TestConformanceLockBoundaries(t *testing.T) {
	t.Parallel() // on stores and clusters of its own
	var local, remote, forwarded, mem []Outcome
	t.Run("local node", func(t *testing.T) { local = RunBoundaries(t, localTarget(t)) })
	t.Run("remote client", func(t *testing.T) { remote = RunBoundaries(t, remoteTarget(t)) })
	t.Run("forwarded by a follower", func(t *testing.T) { forwarded = RunBoundaries(t, forwardedTarget(t)) })
	t.Run("in memory", func(t *testing.T) {
		s := memservice.New(memservice.Config{Rules: rules})
		t.Cleanup(func() { s.Close() })
		mem = RunBoundaries(t, Target{Service: s, Stop: func() { s.Close() }})
	})
	Compare(t, "local node", local, "remote client", remote)
	Compare(t, "local node", local, "forwarded by a follower", forwarded)
	Compare(t, "local node", local, "in memory", mem)
}
