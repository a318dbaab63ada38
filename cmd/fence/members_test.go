//go:build e2e

package main

import (
	"encoding/json"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/testkit/testutil"
)

// membersJSONOut is `fence members --json`.
type membersJSONOut struct {
	AnsweredBy string `json:"answeredBy"`
	Members    []struct {
		ID       string `json:"id"`
		RaftAddr string `json:"raftAddr"`
		Suffrage string `json:"suffrage"`
		Leader   bool   `json:"leader"`
		Error    string `json:"error"`
		Status   *struct {
			Role     string `json:"role"`
			LeaderID string `json:"leaderId"`
			Ready    bool   `json:"ready"`
			Applied  uint64 `json:"appliedIndex"`
		} `json:"status"`
	} `json:"members"`
}

func listMembers(t *testing.T, url string) membersJSONOut {
	t.Helper()
	// The listing is printed whatever the exit status: 0, or 6 (no leader
	// yet) and 1 (a member did not answer) while a cluster changes.
	r := fenceRun(t, url, "members", "--json")
	if r.code != exitOK && r.code != exitNoLeader && r.code != exitError {
		r.want(t, exitOK, "fence members --json")
	}
	var out membersJSONOut
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("fence members --json: %v\n%s", err, r.stdout)
	}
	return out
}

// awaitMembers polls `fence members --json` at url until every member in
// ids is listed, reachable and ready, and leader leads; the others none.
func awaitMembers(t *testing.T, url, leader string, ids ...string) membersJSONOut {
	t.Helper()
	deadline := time.Now().Add(procLimit)
	for {
		out := listMembers(t, url)
		var got []string
		ok := true
		for _, m := range out.Members {
			got = append(got, m.ID)
			ok = ok && m.Status != nil && m.Status.Ready && m.Status.LeaderID == leader && m.Leader == (m.ID == leader) && m.Suffrage == "voter"
		}
		slices.Sort(got)
		if ok && slices.Equal(got, ids) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("members at %s: %+v; want %v ready, %s leading", url, out, ids, leader)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Usage errors of `fence members` are refused before anything is asked
// (exit 2, naming what is wrong); on a single node it lists itself and
// refuses changes (exit 1, "alone"), an invalid address first (exit 2).
func TestProcessMembersSingleNode(t *testing.T) {
	srv := startServe(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"members", "frob"}, exitUsage, `unknown subcommand "frob"`},
		{[]string{"members", "add", "n2"}, exitUsage, "want ID RAFTADDR"},
		{[]string{"members", "remove"}, exitUsage, "members remove: want ID"},
		{[]string{"members", "transfer", "a", "b"}, exitUsage, "at most one ID"},
		{[]string{"members", "list", "x"}, exitUsage, "no arguments"},
		{[]string{"members", "add", "n2", "0.0.0.0:7000"}, exitUsage, "raft_addr"},
		{[]string{"members", "add", "a b", "127.0.0.1:7000"}, exitUsage, "invalid id"},
		{[]string{"members", "add", "n2", "127.0.0.1:7000"}, exitRefused, "alone"},
		{[]string{"members", "transfer"}, exitRefused, "alone"},
	} {
		r := fenceRun(t, srv.url, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("fence %q: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
	r := fenceRun(t, srv.url, "members").want(t, exitOK, "fence members")
	if !strings.Contains(r.stdout, "ROLE") || !strings.Contains(r.stdout, "fence-1") || !strings.Contains(r.stdout, "leader") {
		t.Fatalf("fence members on a single node:\n%s", r.stdout)
	}
	out := listMembers(t, srv.url)
	if len(out.Members) != 1 || out.Members[0].ID != "fence-1" || !out.Members[0].Leader || out.Members[0].Status.Role != "leader" || out.AnsweredBy != "fence-1" {
		t.Fatalf("fence members --json on a single node: %+v", out)
	}
}

// A 3-process cluster formed with --bootstrap and --join (the third joins
// through a follower), managed with fence members: list (also through a
// --server list whose first URL is dead), transfer, remove, add back, add
// a fourth node started to wait; a member killed with SIGKILL is listed as
// unreachable.
func TestProcessMembersCluster(t *testing.T) {
	a1, a2, a3 := testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t)
	n1 := startServe(t, "--node-id", "n1", "--raft-addr", a1, "--bootstrap")
	n2 := startServe(t, "--node-id", "n2", "--raft-addr", a2, "--join", n1.url)
	n3 := startServe(t, "--node-id", "n3", "--raft-addr", a3, "--join", n2.url)
	awaitMembers(t, n3.url, "n1", "n1", "n2", "n3")

	r := fenceRun(t, "http://"+testutil.FreeAddr(t)+","+n2.url, "members").want(t, exitOK, "fence members with a dead first --server")
	for _, want := range []string{"n1", a1, "n2", a2, "n3", a3, "voter", "leader", "follower", "*"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("fence members lacks %q:\n%s", want, r.stdout)
		}
	}

	r = fenceRun(t, n2.url, "members", "transfer", "nope").want(t, exitUsage, "fence members transfer nope")
	if !strings.Contains(r.stderr, "a voter of the cluster") {
		t.Errorf("transfer to a non-member: %q", r.stderr)
	}
	r = fenceRun(t, n1.url, "members", "transfer", "n3").want(t, exitOK, "fence members transfer n3")
	if !strings.Contains(r.stdout, "n3") {
		t.Errorf("transfer output: %q", r.stdout)
	}
	awaitMembers(t, n1.url, "n3", "n1", "n2", "n3")

	r = fenceRun(t, n2.url, "members", "remove", "n1").want(t, exitOK, "fence members remove n1")
	if !strings.Contains(r.stdout, "removed n1") {
		t.Errorf("remove n1: %q", r.stdout)
	}
	r = fenceRun(t, n2.url, "members", "remove", "n1").want(t, exitOK, "fence members remove n1 again")
	if !strings.Contains(r.stdout, "n1 is not a member (nothing removed)") {
		t.Errorf("remove n1 again: %q", r.stdout)
	}
	awaitMembers(t, n2.url, "n3", "n2", "n3")
	fenceRun(t, n2.url, "members", "add", "n1", a1).want(t, exitOK, "fence members add n1")
	awaitMembers(t, n3.url, "n3", "n1", "n2", "n3")

	// A node started without --bootstrap, --join or --peers waits to be
	// added, and says so when asked; added, it is a member like the others.
	a4 := testutil.FreeAddr(t)
	n4 := startServe(t, "--node-id", "n4", "--raft-addr", a4)
	r = fenceRun(t, n4.url, "members").want(t, exitNoLeader, "fence members on a waiting node (it knows no leader)")
	if !strings.Contains(r.stdout, "n4, which answered, is not in the configuration") {
		t.Errorf("fence members on a waiting node:\n%s", r.stdout)
	}
	// Listed first, a node that knows no leader does not speak for the
	// cluster: the next --server, which knows the leader, is asked.
	r = fenceRun(t, n4.url+","+n3.url, "members").want(t, exitOK, "fence members with a leaderless first --server")
	if !strings.Contains(r.stdout, "*") {
		t.Errorf("fence members with a leaderless first --server shows no leader:\n%s", r.stdout)
	}
	fenceRun(t, n1.url, "members", "add", "n4", a4).want(t, exitOK, "fence members add n4")
	awaitMembers(t, n4.url, "n3", "n1", "n2", "n3", "n4")

	n2.cmd.Process.Signal(syscall.SIGKILL)
	waitExited(t, n2.exited, "n2 after SIGKILL")
	out := listMembers(t, n1.url)
	for _, m := range out.Members {
		if (m.ID == "n2") != (m.Status == nil) || m.ID == "n2" && !strings.HasPrefix(m.Error, "unreachable") {
			t.Errorf("after n2's kill, n1 lists %+v", m)
		}
	}
	r = fenceRun(t, n1.url, "members").want(t, exitError, "fence members with n2 down (a member did not answer)")
	if !strings.Contains(r.stdout, "unreachable") {
		t.Errorf("fence members with n2 down:\n%s", r.stdout)
	}
}

// The table says why a member has no status: unreachable, or another node
// on its address; the error follows the table.
func TestPrintMembersWithoutStatus(t *testing.T) {
	var b strings.Builder
	printMembers(&b, &fencev1.MembersResponse{AnsweredBy: "a", Members: []*fencev1.Member{
		{Id: "a", RaftAddr: "h:1", Suffrage: "voter", Leader: true, Status: &fencev1.NodeStatusResponse{Id: "a", Role: "leader", AppliedIndex: 7, Term: 2}},
		{Id: "b", RaftAddr: "h:2", Suffrage: "voter", Error: "unreachable: dial tcp h:2: connect: connection refused"},
		{Id: "c", RaftAddr: "h:3", Suffrage: "voter", Error: "wrong node: the node at h:3 is x"},
	}})
	lines := strings.Split(b.String(), "\n")
	for i, want := range [][]string{{"a", "h:1", "leader", "*", "7", "2"}, {"b", "h:2", "unreachable"}, {"c", "h:3", "wrong node"}} {
		for _, w := range want {
			if !strings.Contains(lines[i+1], w) {
				t.Errorf("row %d %q lacks %q", i+1, lines[i+1], w)
			}
		}
	}
	for _, w := range []string{"b: unreachable: dial tcp h:2", "c: wrong node: the node at h:3 is x"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, b.String())
		}
	}
	if strings.Contains(b.String(), "not in the configuration") {
		t.Errorf("a member answered, yet:\n%s", b.String())
	}
}
