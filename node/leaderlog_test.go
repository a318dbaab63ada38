package node

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence/testkit/testutil"
)

// leaderLine is one "leader changed" line of a node's JSON log.
type leaderLine struct {
	Msg      string `json:"msg"`
	NodeID   string `json:"node_id"`
	Term     uint64 `json:"term"`
	LeaderID string `json:"leader_id"`
	Role     string `json:"role"`
}

func leaderLines(t *testing.T, log string) []leaderLine {
	t.Helper()
	var out []leaderLine
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		var l leaderLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("not a JSON log line: %q: %v", sc.Text(), err)
		}
		if l.Msg == "leader changed" {
			out = append(out, l)
		}
	}
	return out
}

// Every node logs one "leader changed" line per leader it learns of, with
// its own id, the term and its role; a leadership transfer is logged by
// every node with the new term; no leader and term is logged twice.
func TestClusterLogsLeaderChanges(t *testing.T) {
	logs := map[string]*testutil.Buffer{}
	tc := startCluster(t, clusterOpts{n: 3, tweak: func(c *Config) {
		logs[c.NodeID] = &testutil.Buffer{}
		c.Logger = slog.New(slog.NewJSONHandler(logs[c.NodeID], nil))
	}})
	lead := tc.leader()
	to := tc.others(lead)[0]
	tc.transferTo(to)
	// On a loaded machine a heartbeat can be missed and another election
	// follow the transfer: the test follows whatever raft did. Each node
	// logs the change it saw, after raft reported it: wait until its last
	// line names the leader and term it reports now (both re-read, the hang
	// guard is clusterWait), then check its lines.
	tc.leader() // the cluster agrees on a leader again
	for _, mb := range tc.members {
		deadline := time.Now().Add(clusterWait)
		for {
			leader, _ := mb.node.Leader()
			term := mb.node.Status().Term
			ls := leaderLines(t, logs[mb.id].String())
			if n := len(ls); n > 0 && leader != "" && ls[n-1].LeaderID == leader && ls[n-1].Term == term {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never logged 'leader changed' to %q in term %d, the leader and term it reports; log:\n%s", mb.id, leader, term, logs[mb.id].String())
			}
			time.Sleep(10 * time.Millisecond) // a read of the log: polling changes nothing
		}
		ls := leaderLines(t, logs[mb.id].String())
		seen := map[leaderLine]bool{}
		for i, l := range ls {
			if seen[l] {
				t.Errorf("%s logged %+v twice; its lines: %+v", mb.id, l, ls)
			}
			seen[l] = true
			wantRole := "follower"
			if l.LeaderID == mb.id {
				wantRole = "leader"
			}
			if l.NodeID != mb.id || l.Role != wantRole || l.Term == 0 {
				t.Errorf("%s: line %+v: want node_id %s, role %s, a term", mb.id, l, mb.id, wantRole)
			}
			if i > 0 && l.Term < ls[i-1].Term {
				t.Errorf("%s: line %+v after a later term %d", mb.id, l, ls[i-1].Term)
			}
		}
		// The first leader, in an earlier term, then the transfer's: the
		// first line naming a leader names the first leader, a later one
		// the target of the transfer in a later term (more may follow
		// under load; "no leader" lines may come between).
		var named []leaderLine
		for _, l := range ls {
			if l.LeaderID != "" {
				named = append(named, l)
			}
		}
		if len(named) < 2 || named[0].LeaderID != lead.id {
			t.Errorf("%s: lines %+v: want %s first", mb.id, ls, lead.id)
			continue
		}
		found := false
		for _, l := range named[1:] {
			found = found || l.LeaderID == to.id && l.Term > named[0].Term
		}
		if !found {
			t.Errorf("%s: lines %+v: want %s in a term after %d", mb.id, ls, to.id, named[0].Term)
		}
	}
}

// What logLeader makes of a sequence of changes raft reports: a leader
// lost and found again in the same term (a follower's pre-vote that found
// the leader alive) is not a second "leader changed" — the duplicate a
// 3-node run under -race once logged.
func TestLogLeaderSequence(t *testing.T) {
	var buf testutil.Buffer
	n := &Node{cfg: Config{NodeID: "n2", Logger: slog.New(slog.NewJSONHandler(&buf, nil))}}
	var seen leaderSeen
	for _, c := range []leaderChange{
		{}, // nothing known at registration: nothing logged
		{id: "n3", addr: "a3", term: 2},
		{id: "n3", addr: "a3", term: 2}, // reported twice: once logged
		{term: 2},                       // lost
		{id: "n3", addr: "a3", term: 2}, // found again, same term
		{term: 3},
		{id: "n2", addr: "a2", term: 3}, // this node leads
	} {
		n.logLeader(&seen, c)
	}
	var got []string
	sc := bufio.NewScanner(strings.NewReader(buf.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%v %v %v %v %v", m["msg"], m["term"], m["leader_id"], m["role"], m["previous_leader"]))
	}
	want := []string{
		"leader changed 2 n3 follower ",
		"no leader 2 <nil> <nil> n3",
		"leader heard from again 2 n3 follower <nil>",
		"no leader 3 <nil> <nil> n3",
		"leader changed 3 n2 leader n3",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A single node's "leader changed" line names no leader address, as its
// NodeStatus does not (raft knows it by its in-memory transport address,
// its node id, which no one can reach).
func TestSingleNodeLogsNoLeaderAddr(t *testing.T) {
	var buf testutil.Buffer
	n, err := Open(Config{DataDir: t.TempDir(), NodeID: "solo", Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	var line map[string]any
	for deadline := time.Now().Add(clusterWait); line == nil; time.Sleep(10 * time.Millisecond) {
		sc := bufio.NewScanner(strings.NewReader(buf.String()))
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("not a JSON log line: %q: %v", sc.Text(), err)
			}
			if m["msg"] == "leader changed" {
				line = m
			}
		}
		if line == nil && time.Now().After(deadline) {
			t.Fatalf("no 'leader changed' line; log:\n%s", buf.String())
		}
	}
	if _, addr := n.Leader(); addr == "" {
		t.Fatal("raft knows no leader address: the test shows nothing")
	}
	if a, ok := line["leader_addr"]; ok || line["leader_id"] != "solo" || line["role"] != "leader" {
		t.Fatalf("line %v: want leader_id solo, role leader, no leader_addr (got %v)", line, a)
	}
}
