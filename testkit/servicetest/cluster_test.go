package servicetest

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/fenceworks/fence/daemon"
	"github.com/fenceworks/fence/node"
	"github.com/fenceworks/fence/testkit/testutil"
)

// member is one server of a test cluster, serving its client port.
type member struct {
	s      *daemon.Daemon
	url    string
	served chan error
	once   sync.Once
}

// stop shuts the member down (once).
func (m *member) stop() {
	m.once.Do(func() {
		m.s.Shutdown(context.Background())
		<-m.served
	})
}

// startCluster starts three in-process servers as a cluster with static
// peers (real raft over loopback TCP, the API multiplexed on the raft
// port) and returns, once they are, a leader in office and a follower that
// knows it and has caught up. Every member stops when the test ends.
func startCluster(t *testing.T) (leader, follower *member) {
	t.Helper()
	peers := []node.Peer{{ID: "n1"}, {ID: "n2"}, {ID: "n3"}}
	for i := range peers {
		peers[i].Addr = testutil.FreeAddr(t)
	}
	// The data dirs first: cleanups run last-registered first, so the
	// members stop before their dirs are removed (a dir removed under a
	// running node failed the test with "directory not empty").
	dirs := make([]string, len(peers))
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	members := make([]*member, 0, len(peers))
	t.Cleanup(func() {
		for _, m := range members {
			m.stop()
		}
	})
	for i, p := range peers {
		s, err := daemon.New(daemon.Config{
			DataDir: dirs[i], NodeID: p.ID, Logger: quiet, ReadyTimeout: time.Minute,
			Cluster: daemon.ClusterConfig{RaftAddr: p.Addr, Peers: peers},
		})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			s.Close()
			t.Fatal(err)
		}
		m := &member{s: s, url: "http://" + ln.Addr().String(), served: make(chan error, 1)}
		go func() { m.served <- s.Serve(ln) }()
		members = append(members, m)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		leader, follower = nil, nil
		for _, m := range members {
			st := m.s.Node().Status()
			switch {
			case st.Leader && m.s.Ready():
				leader = m
			case !st.Leader && m.s.Ready():
				follower = m
			}
		}
		if leader != nil && follower != nil {
			return leader, follower
		}
		if time.Now().After(deadline) {
			t.Fatal("no leader in office with a ready follower after a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startSingle starts one server, alone (no raft port).
func startSingle(t *testing.T) *member {
	t.Helper()
	s, err := daemon.New(daemon.Config{DataDir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	m := &member{s: s, url: "http://" + ln.Addr().String(), served: make(chan error, 1)}
	go func() { m.served <- s.Serve(ln) }()
	t.Cleanup(m.stop)
	return m
}
