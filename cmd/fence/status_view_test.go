package main

import (
	"testing"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// A leader is known from a non-admin's view (role and ready only, no
// leader id) when the node leads or is ready (a ready follower knows a
// leader): fence status through a follower with an application's token
// must not exit 6 "no leader known" (TestProcessStatusNonAdminToken asks
// a single node, a leader).
func TestStatusKnowsLeaderFromLimitedView(t *testing.T) {
	for _, c := range []struct {
		st   *fencev1.NodeStatusResponse
		want bool
	}{
		{&fencev1.NodeStatusResponse{Role: "leader", Ready: true}, true},
		{&fencev1.NodeStatusResponse{Role: "follower", Ready: true}, true},
		{&fencev1.NodeStatusResponse{Role: "follower"}, false},
		{&fencev1.NodeStatusResponse{Role: "candidate"}, false},
		{&fencev1.NodeStatusResponse{Id: "n2", Role: "follower", LeaderId: "n1"}, true},
		{&fencev1.NodeStatusResponse{Id: "n2", Role: "follower", Ready: true}, false}, // an admin's view says the leader's id when known
	} {
		if got := knowsLeader(c.st); got != c.want {
			t.Errorf("knowsLeader(%v) = %v, want %v", c.st, got, c.want)
		}
	}
}
