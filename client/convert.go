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
		Signed:    signedFromProto(p),
		Mode:      modeFromProto(p.GetMode()),
		Permits:   p.GetPermits(),
		Locks:     specsFromProto(p.GetLocks()),
		Proofs:    proofsFromProto(p),
	}
}

// modeFromProto reads a lease's mode; one this client does not know (a
// newer server's) reads as the number no request can carry, never as
// Exclusive.
func modeFromProto(text string) fence.Mode {
	m, err := fence.ParseMode(text)
	if err != nil {
		return fence.Mode(255)
	}
	return m
}

func specsFromProto(ps []*fencev1.LockSpec) []fence.LockSpec {
	if len(ps) == 0 {
		return nil
	}
	out := make([]fence.LockSpec, len(ps))
	for i, p := range ps {
		out[i] = fence.LockSpec{Name: p.GetName(), Mode: modeFromProto(p.GetMode()), Permits: p.GetPermits()}
	}
	return out
}

// proofsFromProto reads a set lease's proofs as signedFromProto reads its
// signed_token: one that does not parse or names another token is the
// zero SignedToken in its place (that lock then has no proof).
func proofsFromProto(p *fencev1.Lease) []fence.SignedToken {
	if len(p.GetProofs()) == 0 {
		return nil
	}
	out := make([]fence.SignedToken, len(p.GetProofs()))
	for i, text := range p.GetProofs() {
		st, err := fence.ParseSignedToken(text)
		if text != "" && err == nil && st.Token == fence.Token(p.GetToken()) {
			out[i] = st
		}
	}
	return out
}

// signedFromProto reads a lease's signed_token; one that does not parse,
// or names another token, is dropped (the lease then carries no proof, and
// a guard with a key set refuses it as it would a forged one).
func signedFromProto(p *fencev1.Lease) fence.SignedToken {
	st, err := fence.ParseSignedToken(p.GetSignedToken())
	if p.GetSignedToken() == "" || err != nil || st.Token != fence.Token(p.GetToken()) {
		return fence.SignedToken{}
	}
	return st
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
		Permits:            p.GetPermits(),
	}
	for _, h := range p.GetHolders() {
		info.Holders = append(info.Holders, leaseFromProto(h))
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

// The fence requests as wire requests: the one place a fence request's
// fields become a proto request's, for the Client and the remote Service
// alike. A zero duration is sent absent.

func refToProto(r fence.SessionRef) *fencev1.SessionRef {
	if r == (fence.SessionRef{}) {
		return nil
	}
	return &fencev1.SessionRef{Id: r.ID, Seq: r.Seq, Ack: r.Ack}
}

func acquireToProto(r fence.AcquireRequest) *fencev1.AcquireRequest {
	return &fencev1.AcquireRequest{
		Name: r.Name, Owner: r.Owner, Ttl: durationOrNil(r.TTL), Wait: durationOrNil(r.Wait),
		RequestId: r.RequestID, LockDelay: durationOrNil(r.LockDelay), Session: refToProto(r.Session),
		Mode: fencev1.ModeText(r.Mode), Permits: r.Permits, Locks: fencev1.LockSpecsOf(r.Locks),
	}
}

func renewToProto(r fence.RenewRequest) *fencev1.RenewRequest {
	return &fencev1.RenewRequest{Name: r.Name, Token: uint64(r.Token), Ttl: durationOrNil(r.TTL), Session: refToProto(r.Session)}
}

func releaseToProto(r fence.ReleaseRequest) *fencev1.ReleaseRequest {
	return &fencev1.ReleaseRequest{Name: r.Name, Token: uint64(r.Token), Session: refToProto(r.Session)}
}

func writeToProto(r fence.WriteRequest) *fencev1.WriteRequest {
	return &fencev1.WriteRequest{Resource: r.Resource, Token: uint64(r.Token), Value: r.Value, OpId: r.OpID, Session: refToProto(r.Session), SignedToken: signedRequestText(r.Signed)}
}

func addToProto(r fence.AddRequest) *fencev1.AddRequest {
	return &fencev1.AddRequest{Resource: r.Resource, Token: uint64(r.Token), Delta: r.Delta, OpId: r.OpID, Session: refToProto(r.Session), SignedToken: signedRequestText(r.Signed)}
}

func deleteToProto(r fence.DeleteRequest) *fencev1.DeleteRequest {
	return &fencev1.DeleteRequest{Resource: r.Resource, Token: uint64(r.Token), OpId: r.OpID, Session: refToProto(r.Session), SignedToken: signedRequestText(r.Signed)}
}

func openToProto(r fence.OpenSessionRequest) *fencev1.OpenSessionRequest {
	return &fencev1.OpenSessionRequest{Ttl: durationOrNil(r.TTL), RequestId: r.RequestID}
}

// keepAliveToProto names the session in the request's session field (ID,
// or Session.ID when ID is 0).
func keepAliveToProto(r fence.KeepAliveRequest) *fencev1.KeepAliveRequest {
	return &fencev1.KeepAliveRequest{Session: r.SessionID(), Ttl: durationOrNil(r.TTL), SessionRef: refToProto(r.Session)}
}

func closeToProto(r fence.CloseSessionRequest) *fencev1.CloseSessionRequest {
	return &fencev1.CloseSessionRequest{Session: r.SessionID(), SessionRef: refToProto(r.Session)}
}

// signedRequestText is a write's signed_token: sent only with a proof (a
// bare token says nothing the token field does not).
func signedRequestText(st fence.SignedToken) string {
	if !st.Signed() {
		return ""
	}
	return st.String()
}
