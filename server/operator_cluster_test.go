package server

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/cluster/clusterapi"
)

// ClusterOverview of a single real node: one member, the leader, healthy,
// its applied index and last token; an admin's call only.
func TestClusterOverviewOfASingleNodeAndOnlyForAnAdmin(t *testing.T) {
	t.Parallel()
	f := newOperatorFixture(t, nil)
	f.must(fencev1connect.LockServiceAcquireProcedure, f.creds["jobs"], `{"name":"jobs/c","ttl":"60s"}`)
	out := f.must(fencev1connect.OperatorServiceClusterOverviewProcedure, f.creds["admin"], `{}`)
	ms := objects(out["members"])
	if len(ms) != 1 {
		t.Fatalf("%d members, want 1: %s", len(ms), out["_raw"])
	}
	m := ms[0]
	if m["healthy"] != true || m["leader"] != true || m["voter"] != true || m["role"] != "leader" || num(m["appliedIndex"]) == 0 ||
		num(m["term"]) == 0 || num(m["lastToken"]) != 1 || m["error"] != nil || m["id"] != out["answeredBy"] {
		t.Fatalf("the member: %s; want healthy, leader, voter, role leader, applied index and term set, last token 1, no error", out["_raw"])
	}
	for _, who := range []string{"jobs", "read", "mixed"} {
		f.refused(fencev1connect.OperatorServiceClusterOverviewProcedure, f.creds[who], `{}`, http.StatusForbidden, "PERMISSION_DENIED")
	}
	f.refused(fencev1connect.OperatorServiceClusterOverviewProcedure, "", `{}`, http.StatusUnauthorized, "UNAUTHENTICATED")
}

// downMembership lists three members as cluster.Membership does when one
// answered, one did not answer in time and one answered not ready.
type downMembership struct{ memMembership }

func (d downMembership) Members(ctx context.Context) (clusterapi.MemberList, error) {
	self := d.NodeStatus(false)
	slow := self
	slow.ID, slow.Role, slow.Ready = "n3", "follower", false
	return clusterapi.MemberList{AnsweredBy: self.ID, Members: []clusterapi.Member{
		{ID: self.ID, RaftAddr: "127.0.0.1:1", Suffrage: clusterapi.Voter, Leader: true, Status: &self},
		{ID: "n2", RaftAddr: "127.0.0.1:2", Suffrage: clusterapi.Voter, Error: "unreachable: context deadline exceeded"},
		{ID: "n3", RaftAddr: "127.0.0.1:3", Suffrage: clusterapi.Nonvoter, Status: &slow},
	}}, nil
}

// A member that did not answer is healthy false with its error; one that
// answered not ready is healthy false, "not ready"; the others healthy.
func TestClusterOverviewShowsAMemberThatDidNotAnswerAsUnhealthy(t *testing.T) {
	t.Parallel()
	_, url := startServerDeps(t, Config{}, func(d *Deps) { d.Cluster = downMembership{d.Cluster.(memMembership)} })
	f := &authFixture{t: t, url: url}
	out := f.must(fencev1connect.OperatorServiceClusterOverviewProcedure, "", `{}`)
	ms := objects(out["members"])
	if len(ms) != 3 {
		t.Fatalf("%d members: %s", len(ms), out["_raw"])
	}
	got := fmt.Sprintf("%v %v %v | %v %v %v | %v %v %v", ms[0]["healthy"], ms[0]["error"], ms[0]["address"],
		ms[1]["healthy"], ms[1]["error"], ms[1]["role"], ms[2]["healthy"], ms[2]["error"], ms[2]["voter"])
	want := "true <nil> 127.0.0.1:1 | <nil> unreachable: context deadline exceeded <nil> | <nil> not ready <nil>"
	if got != want {
		t.Fatalf("members:\n got %s\nwant %s\n%s", got, want, out["_raw"])
	}
}
