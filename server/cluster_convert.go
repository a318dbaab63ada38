package server

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/cluster/clusterapi"
)

// nodeStatusToProto is the NodeStatus of package cluster on the wire.
// LastContact 0 (none measured) is absent.
func nodeStatusToProto(s clusterapi.NodeStatus) *fencev1.NodeStatusResponse {
	r := &fencev1.NodeStatusResponse{
		Id: s.ID, RaftAddr: s.RaftAddr, Role: s.Role, LeaderId: s.LeaderID, LeaderAddr: s.LeaderAddr,
		Term: s.Term, CommitIndex: s.CommitIndex, AppliedIndex: s.AppliedIndex, LastToken: s.LastToken,
		Ready: s.Ready, ClusterId: s.ClusterID,
		Sessions: s.Sessions, LeasesHeld: s.LeasesHeld, Waiters: s.Waiters, Queued: s.Queued,
		ServerTime: durationpb.New(s.ServerTime), Slack: durationpb.New(s.Slack),
		DataDirBytes: s.DataDirBytes, Resources: s.Resources, ResourceBytes: s.ResourceBytes,
		OldestIdAge: durationpb.New(s.OldestIDAge), Fatal: s.Fatal, Version: s.Version, InsecureListen: s.InsecureListen,
		RememberedOpIds: s.RememberedOps, RememberedRequestIds: s.RememberedRequests, IdMemoryNearCap: s.IDMemoryNearCap, SnapshotBytes: s.SnapshotBytes,
	}
	if s.LastContact != 0 {
		r.LastContact = durationpb.New(s.LastContact)
	}
	return r
}

// nodeStatusFromProto is nodeStatusToProto's inverse.
func nodeStatusFromProto(r *fencev1.NodeStatusResponse) clusterapi.NodeStatus {
	return clusterapi.NodeStatus{
		ID: r.GetId(), RaftAddr: r.GetRaftAddr(), Role: r.GetRole(), LeaderID: r.GetLeaderId(), LeaderAddr: r.GetLeaderAddr(),
		LastContact: dur(r.GetLastContact()),
		Term:        r.GetTerm(), CommitIndex: r.GetCommitIndex(), AppliedIndex: r.GetAppliedIndex(), LastToken: r.GetLastToken(),
		Ready: r.GetReady(), ClusterID: r.GetClusterId(),
		Sessions: r.GetSessions(), LeasesHeld: r.GetLeasesHeld(), Waiters: r.GetWaiters(), Queued: r.GetQueued(),
		ServerTime: dur(r.GetServerTime()), Slack: dur(r.GetSlack()),
		DataDirBytes: r.GetDataDirBytes(), Resources: r.GetResources(), ResourceBytes: r.GetResourceBytes(),
		OldestIDAge: dur(r.GetOldestIdAge()), Fatal: r.GetFatal(), Version: r.GetVersion(), InsecureListen: r.GetInsecureListen(),
		RememberedOps: r.GetRememberedOpIds(), RememberedRequests: r.GetRememberedRequestIds(), IDMemoryNearCap: r.GetIdMemoryNearCap(), SnapshotBytes: r.GetSnapshotBytes(),
	}
}

// dur is d as a time.Duration; absent is 0.
func dur(d *durationpb.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.AsDuration()
}

// membersToProto is a MemberList of package cluster on the wire.
func membersToProto(l clusterapi.MemberList) *fencev1.MembersResponse {
	r := &fencev1.MembersResponse{AnsweredBy: l.AnsweredBy, Members: make([]*fencev1.Member, 0, len(l.Members))}
	for _, m := range l.Members {
		pm := &fencev1.Member{Id: m.ID, RaftAddr: m.RaftAddr, Suffrage: m.Suffrage, Leader: m.Leader, Error: m.Error}
		if m.Status != nil {
			pm.Status = nodeStatusToProto(*m.Status)
		}
		r.Members = append(r.Members, pm)
	}
	return r
}
