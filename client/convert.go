package client

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

func leaseFromProto(p *fencev1.Lease) fence.Lease {
	if p == nil {
		return fence.Lease{}
	}
	return fence.Lease{
		Name:      p.GetName(),
		Owner:     p.GetOwner(),
		Token:     fence.Token(p.GetToken()),
		TTL:       p.GetTtl().AsDuration(),
		Remaining: p.GetRemaining().AsDuration(),
	}
}

// durationOrNil sends 0 as an absent field.
func durationOrNil(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

func lockFromProto(p *fencev1.LockInfo) LockInfo {
	info := LockInfo{
		Name:               p.GetName(),
		Waiters:            int(p.GetWaiters()),
		LockDelayRemaining: p.GetLockDelayRemaining().AsDuration(),
		LastToken:          fence.Token(p.GetLastToken()),
	}
	if p.GetLease() != nil {
		l := leaseFromProto(p.GetLease())
		info.Lease = &l
	}
	return info
}

func resourceFromProto(p *fencev1.ResourceState) Resource {
	return Resource{
		Resource:  p.GetResource(),
		Value:     p.GetValue(),
		LastToken: fence.Token(p.GetLastToken()),
		Version:   p.GetVersion(),
		Deleted:   p.GetDeleted(),
	}
}
