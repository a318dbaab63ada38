package server

import (
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

func leaseToProto(l *fence.Lease) *fencev1.Lease {
	if l == nil {
		return nil
	}
	return &fencev1.Lease{
		Name:      l.Name,
		Owner:     l.Owner,
		Token:     uint64(l.Token),
		Ttl:       durationpb.New(l.TTL),
		Remaining: durationpb.New(l.Remaining),
	}
}

func lockToProto(li fence.LockInfo) *fencev1.LockInfo {
	p := &fencev1.LockInfo{
		Name:      li.Name,
		Lease:     leaseToProto(li.Lease),
		Waiters:   uint32(li.Waiters),
		LastToken: uint64(li.LastToken),
	}
	if li.LockDelayRemaining > 0 {
		p.LockDelayRemaining = durationpb.New(li.LockDelayRemaining)
	}
	return p
}

func resourceToProto(rs *fence.ResourceState) *fencev1.ResourceState {
	if rs == nil {
		return nil
	}
	return &fencev1.ResourceState{
		Resource:  rs.Resource,
		Value:     rs.Value,
		LastToken: uint64(rs.LastToken),
		Version:   rs.Version,
		Deleted:   rs.Deleted,
	}
}

func sessionToProto(si *fence.SessionInfo) *fencev1.Session {
	if si == nil {
		return nil
	}
	return &fencev1.Session{Id: si.ID, Ttl: durationpb.New(si.TTL), Remaining: durationpb.New(si.Remaining), Leases: uint64(max(si.Leases, 0))}
}
