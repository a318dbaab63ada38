package node

import (
	"context"
	"errors"
	"slices"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

// Service is the node as a fence.Service: each call is the state.Command
// it proposes (Apply) or the linearizable read it makes, and its answer is
// made of the applied state.Result.
//
// Every request is judged before it is proposed by its Validate, against
// the rules recorded in the log (the largest TTL), so a bad field is
// refused as the server and the client refuse it and costs no log entry;
// the reads' arguments (Get, Read) are judged as names. The machine judges
// each command again as it applies it (state/validate.go), so a command
// in the log is refused alike on every replica. The commands are made in
// command.go.
//
// Errors: a Fence refusal is returned as the machine's typed error (and
// the value returned with it is zero but for Replayed, which reports a
// refusal that is the saved result of a retried session Seq). Every other
// error of the node (ErrNotLeader: nothing was proposed; ErrClosed;
// ErrUnknownOutcome; the context's error) also matches
// fence.ErrUnavailable, with its message unchanged, and still matches the
// node's own error (errors.Is(err, ErrNotLeader) tells a caller that may
// send the request elsewhere that nothing was proposed).
func (n *Node) Service() fence.Service { return nodeService{n} }

type nodeService struct{ n *Node }

var _ fence.Service = nodeService{}

// unavailableError marks a node error as fence.ErrUnavailable without
// changing its message (clients and logs see the node's words).
type unavailableError struct{ err error }

func (e unavailableError) Error() string   { return e.err.Error() }
func (e unavailableError) Unwrap() []error { return []error{e.err, fence.ErrUnavailable} }

// outcome splits what Apply returned into the result and the error a
// Service caller gets: a refusal as it is, any other error as unavailable.
func outcome(res state.Result, err error) (state.Result, error) {
	if err != nil {
		return res, unavailable(err)
	}
	return res, res.Err
}

func unavailable(err error) error {
	if err == nil || fence.ReasonOf(err) != "" || errors.Is(err, fence.ErrUnavailable) {
		return err
	}
	return unavailableError{err}
}

// errMissing is an applied result without what its operation returns: a
// bug, never a refusal and never unavailable.
func errMissing(what string) error { return errors.New("node: " + what) }

// limits are the bounds requests are judged by before they are proposed:
// the rules recorded in the log, which the machine applies them by.
func (s nodeService) limits() fence.Limits { return s.n.Limits() }

func (s nodeService) Acquire(ctx context.Context, req fence.AcquireRequest) (fence.Grant, error) {
	if err := req.Validate(s.limits()); err != nil {
		return fence.Grant{}, err
	}
	return s.grant(ctx, acquireCommand(req), "acquire applied without a lease")
}

func (s nodeService) Renew(ctx context.Context, req fence.RenewRequest) (fence.Grant, error) {
	if err := req.Validate(s.limits()); err != nil {
		return fence.Grant{}, err
	}
	return s.grant(ctx, renewCommand(req), "renew applied without a lease")
}

func (s nodeService) grant(ctx context.Context, cmd state.Command, missing string) (fence.Grant, error) {
	res, err := outcome(s.n.Apply(ctx, cmd))
	if err != nil {
		return fence.Grant{Replayed: res.Replayed && res.Err != nil}, err
	}
	if res.Lease == nil {
		return fence.Grant{}, errMissing(missing)
	}
	g := fence.Grant{Lease: *res.Lease, Replayed: res.Replayed}
	s.n.signLease(&g.Lease)
	if res.Session != nil {
		si := sessionInfo(*res.Session)
		g.Session = &si
	}
	return g, nil
}

func (s nodeService) Release(ctx context.Context, req fence.ReleaseRequest) (fence.Released, error) {
	if err := req.Validate(s.limits()); err != nil {
		return fence.Released{}, err
	}
	res, err := outcome(s.n.Apply(ctx, releaseCommand(req)))
	return fence.Released{Replayed: res.Replayed && (err == nil || res.Err != nil)}, err
}

func (s nodeService) Get(ctx context.Context, name string) (fence.LockInfo, error) {
	if err := fence.ValidateName("name", name); err != nil {
		return fence.LockInfo{}, err
	}
	li, err := s.n.Lock(ctx, name)
	if err != nil {
		return fence.LockInfo{}, unavailable(err)
	}
	out := lockInfo(li)
	// A held lock's leases carry their proofs (List's do not), each for
	// its own holder: a proof is a bearer credential at every guard, so a
	// reader who is not the holder (nor an admin) sees the token but gets
	// no proof to write with.
	p, ok := fence.PrincipalFrom(ctx)
	for i := range out.Holders {
		if li.ProofForHolder(i, p, ok) {
			s.n.signLease(&out.Holders[i])
		}
	}
	if len(out.Holders) > 0 {
		out.Lease = &out.Holders[0]
	}
	return out, nil
}

func (s nodeService) List(ctx context.Context, req fence.ListRequest) (fence.LockPage, error) {
	if err := req.Validate(s.limits()); err != nil {
		return fence.LockPage{}, err
	}
	locks, next, err := s.n.LocksPage(ctx, req.Prefix, req.After, req.Limit)
	if err != nil {
		return fence.LockPage{}, unavailable(err)
	}
	page := fence.LockPage{Locks: make([]fence.LockInfo, 0, len(locks)), Next: next}
	for _, li := range locks {
		page.Locks = append(page.Locks, lockInfo(li))
	}
	return page, nil
}

func (s nodeService) Write(ctx context.Context, req fence.WriteRequest) (fence.Written, error) {
	if err := req.Validate(s.limits()); err != nil {
		return fence.Written{}, err
	}
	if err := s.n.verifySigned(req.Signed, req.Resource); err != nil {
		return fence.Written{}, err
	}
	return s.written(ctx, writeCommand(req), "write")
}

func (s nodeService) Add(ctx context.Context, req fence.AddRequest) (fence.Written, error) {
	if err := req.Validate(s.limits()); err != nil {
		return fence.Written{}, err
	}
	if err := s.n.verifySigned(req.Signed, req.Resource); err != nil {
		return fence.Written{}, err
	}
	return s.written(ctx, addCommand(req), "add")
}

func (s nodeService) Delete(ctx context.Context, req fence.DeleteRequest) (fence.Written, error) {
	if err := req.Validate(s.limits()); err != nil {
		return fence.Written{}, err
	}
	if err := s.n.verifySigned(req.Signed, req.Resource); err != nil {
		return fence.Written{}, err
	}
	return s.written(ctx, deleteCommand(req), "delete")
}

func (s nodeService) written(ctx context.Context, cmd state.Command, op string) (fence.Written, error) {
	res, err := outcome(s.n.Apply(ctx, cmd))
	if err != nil {
		return fence.Written{Replayed: res.Replayed && res.Err != nil}, err
	}
	if res.Resource == nil {
		return fence.Written{}, errMissing(op + " applied without a resource state")
	}
	return fence.Written{State: resourceState(*res.Resource), Value: res.AddValue, Replayed: res.Replayed}, nil
}

func (s nodeService) Read(ctx context.Context, resource string) (fence.ResourceState, error) {
	if err := fence.ValidateName("resource", resource); err != nil {
		return fence.ResourceState{}, err
	}
	rs, err := s.n.Resource(ctx, resource)
	if err != nil {
		return fence.ResourceState{}, unavailable(err)
	}
	return resourceState(rs), nil
}

func (s nodeService) OpenSession(ctx context.Context, req fence.OpenSessionRequest) (fence.SessionGrant, error) {
	if err := req.Validate(s.limits()); err != nil {
		return fence.SessionGrant{}, err
	}
	return s.session(ctx, openCommand(req), "session open applied without a session")
}

func (s nodeService) KeepAlive(ctx context.Context, req fence.KeepAliveRequest) (fence.SessionGrant, error) {
	if err := req.Validate(s.limits()); err != nil {
		return fence.SessionGrant{}, err
	}
	return s.session(ctx, keepAliveCommand(req), "keepalive applied without a session")
}

func (s nodeService) session(ctx context.Context, cmd state.Command, missing string) (fence.SessionGrant, error) {
	res, err := outcome(s.n.Apply(ctx, cmd))
	if err != nil {
		return fence.SessionGrant{Replayed: res.Replayed && res.Err != nil}, err
	}
	if res.Session == nil {
		return fence.SessionGrant{}, errMissing(missing)
	}
	return fence.SessionGrant{Session: sessionInfo(*res.Session), Replayed: res.Replayed}, nil
}

func (s nodeService) CloseSession(ctx context.Context, req fence.CloseSessionRequest) (fence.Released, error) {
	if err := req.Validate(s.limits()); err != nil {
		return fence.Released{}, err
	}
	res, err := outcome(s.n.Apply(ctx, closeCommand(req)))
	return fence.Released{Replayed: res.Replayed && (err == nil || res.Err != nil)}, err
}

// lockInfo is a lock as the API reports it: every holder, Lease the first.
func lockInfo(li state.LockInfo) fence.LockInfo {
	out := fence.LockInfo{Name: li.Name, Waiters: li.Waiters, LockDelayRemaining: li.LockDelayRemaining, LastToken: li.LastToken,
		Permits: li.Permits, Holders: slices.Clone(li.Holders)}
	if len(out.Holders) > 0 {
		out.Lease = &out.Holders[0]
	}
	return out
}

func resourceState(rs state.ResourceState) fence.ResourceState {
	return fence.ResourceState{Resource: rs.Resource, Value: rs.Value, LastToken: rs.LastToken, Version: rs.Version, Deleted: rs.Deleted}
}

func sessionInfo(si state.SessionInfo) fence.SessionInfo {
	return fence.SessionInfo{ID: si.ID, TTL: si.TTL, Remaining: si.Remaining, Leases: si.Leases}
}
