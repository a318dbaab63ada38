package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence/node"
	"github.com/fenceworks/fence/testkit/testutil"
)

// TestShutdownHandsOverBeforeDrain: a cluster leader that shuts down
// hands leadership over before it drains, so another node leads while the
// drain is still held open by a request in flight (here a request whose
// body never comes). Before the fix the leader drained first: it kept
// leading (and the followers kept forwarding to it) until the drain ended.
func TestShutdownHandsOverBeforeDrain(t *testing.T) {
	const wait = time.Minute // bound on every wait; nothing is timed
	peers := []node.Peer{{ID: "h1"}, {ID: "h2"}, {ID: "h3"}}
	for i := range peers {
		peers[i].Addr = testutil.FreeAddr(t)
	}
	type member struct {
		s      *Daemon
		addr   string
		served chan error
		log    *testutil.Buffer
	}
	var members []*member
	for _, p := range peers {
		log := &testutil.Buffer{}
		s, err := New(Config{
			DataDir: t.TempDir(), NodeID: p.ID, Logger: slog.New(slog.NewJSONHandler(log, nil)),
			ReadyTimeout: wait, ReadTimeout: 2 * wait, Cluster: ClusterConfig{RaftAddr: p.Addr, Peers: peers},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		m := &member{s: s, addr: ln.Addr().String(), served: make(chan error, 1), log: log}
		go func() { m.served <- s.Serve(ln) }()
		members = append(members, m)
	}
	leaderAmong := func(ms []*member) *member {
		for _, m := range ms {
			if st := m.s.Node().Status(); st.Leader && st.Ready() {
				return m
			}
		}
		return nil
	}
	var leader *member
	for deadline := time.Now().Add(wait); leader == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no leader in office")
		}
		leader = leaderAmong(members)
	}
	var others []*member
	for _, m := range members {
		if m != leader {
			others = append(others, m)
		}
	}

	// A request in flight on the leader whose body never comes: the 100
	// Continue says its handler is reading the body, so the drain waits
	// for it.
	conn, err := net.Dial("tcp", leader.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /fence.v1.LockService/Get HTTP/1.1\r\nHost: fence\r\nContent-Type: application/json\r\n"+
		"Content-Length: 64\r\nExpect: 100-continue\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(wait))
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || !strings.Contains(line, "100") {
		t.Fatalf("want 100 Continue from the leader, got %q %v", line, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- leader.s.Shutdown(ctx) }()
	for deadline := time.Now().Add(wait); leaderAmong(others) == nil; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("Shutdown returned (%v) before the request in flight ended", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no other node leads %s after the leader began shutting down, while its drain waits", wait)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) before the request in flight ended", err)
	default:
	}
	conn.Close() // the request ends: the drain is over
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	// The log names the node it handed over to (with its raft address),
	// not to="" (raft's transfer ends before the old leader hears from the
	// new one).
	next := leaderAmong(others)
	var line map[string]any
	sc := bufio.NewScanner(strings.NewReader(leader.log.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not a JSON log line: %q: %v", sc.Text(), err)
		}
		if strings.HasPrefix(m["msg"].(string), "handed leadership over") {
			line = m
		}
	}
	if next == nil || line == nil || line["to"] != next.s.Node().ID() || line["to_addr"] != next.s.Node().RaftAddr() {
		t.Fatalf("handover line %v: want to the new leader (%v) and its raft address; log:\n%s", line, next, leader.log.String())
	}
}
