package memservice

import (
	"context"
	"errors"
	"slices"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

// The fence.Service methods, as node.Node.Service makes them of Apply and
// the machine's reads: each request judged by its Validate against the
// recorded rules, a refusal returned as the machine's typed error, any
// other error (ErrClosed, the context's) matching fence.ErrUnavailable.

type unavailableError struct{ err error }

func (e unavailableError) Error() string   { return e.err.Error() }
func (e unavailableError) Unwrap() []error { return []error{e.err, fence.ErrUnavailable} }

func unavailable(err error) error {
	if err == nil || fence.ReasonOf(err) != "" || errors.Is(err, fence.ErrUnavailable) {
		return err
	}
	return unavailableError{err}
}

func outcome(res state.Result, err error) (state.Result, error) {
	if err != nil {
		return res, unavailable(err)
	}
	return res, res.Err
}

func (s *Service) limits() fence.Limits { return s.Limits() }

func bind(cmd state.Command, ref fence.SessionRef) state.Command {
	cmd.Session, cmd.Seq, cmd.Ack = ref.ID, ref.Seq, ref.Ack
	return cmd
}

func (s *Service) Acquire(ctx context.Context, req fence.AcquireRequest) (fence.Grant, error) {
	if err := req.Validate(s.limits()); err != nil {
		return fence.Grant{}, err
	}
	// As node/command.go: a set of one lock is that lock.
	name, mode, permits, locks := req.Name, req.Mode, req.Permits, req.Locks
	if len(locks) == 1 {
		name, mode, permits, locks = locks[0].Name, locks[0].Mode, locks[0].Permits, nil
	}
	return s.grant(ctx, bind(state.Command{
		Op: state.OpAcquire, Name: name, Mode: mode, Permits: permits, Locks: append([]fence.LockSpec(nil), locks...),
		Owner: req.Owner, TTL: req.TTL, Wait: req.Wait,
		LockDelay: req.LockDelay, RequestID: req.RequestID,
	}, req.Session), "acquire applied without a lease")
}

func (s *Service) Renew(ctx context.Context, req fence.RenewRequest) (fence.Grant, error) {
	if err := req.Validate(s.limits()); err != nil {
		return fence.Grant{}, err
	}
	return s.grant(ctx, bind(state.Command{Op: state.OpRenew, Name: req.Name, Token: req.Token, TTL: req.TTL}, req.Session), "renew applied without a lease")
}

func (s *Service) grant(ctx context.Context, cmd state.Command, missing string) (fence.Grant, error) {
	res, err := outcome(s.Apply(ctx, cmd))
	if err != nil {
		return fence.Grant{Replayed: res.Replayed && res.Err != nil}, err
	}
	if res.Lease == nil {
		return fence.Grant{}, errors.New("memservice: " + missing)
	}
	g := fence.Grant{Lease: *res.Lease, Replayed: res.Replayed}
	s.sign(&g.Lease)
	if res.Session != nil {
		si := sessionInfo(*res.Session)
		g.Session = &si
	}
	return g, nil
}

func (s *Service) Release(ctx context.Context, req fence.ReleaseRequest) (fence.Released, error) {
	if err := req.Validate(s.limits()); err != nil {
		return fence.Released{}, err
	}
	res, err := outcome(s.Apply(ctx, bind(state.Command{Op: state.OpRelease, Name: req.Name, Token: req.Token}, req.Session)))
	return fence.Released{Replayed: res.Replayed && (err == nil || res.Err != nil)}, err
}

// read runs f under the lock at the current server time (a linearizable
// read: there is one copy).
func (s *Service) read(ctx context.Context, f func(m *state.Machine, now int64)) error {
	if err := ctx.Err(); err != nil {
		return unavailable(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	f(s.m, max(s.now(), s.m.Now()))
	return nil
}

func (s *Service) Get(ctx context.Context, name string) (fence.LockInfo, error) {
	if err := fence.ValidateName("name", name); err != nil {
		return fence.LockInfo{}, err
	}
	var li state.LockInfo
	if err := s.read(ctx, func(m *state.Machine, now int64) { li = m.Lock(name, now) }); err != nil {
		return fence.LockInfo{}, err
	}
	out := lockInfo(li)
	// A held lock's leases carry their proofs (List's do not), each for
	// its own holder: a proof is a bearer credential at every guard, so a
	// reader who is not the holder (nor an admin) sees the token but gets
	// no proof to write with.
	p, ok := fence.PrincipalFrom(ctx)
	for i := range out.Holders {
		if li.ProofForHolder(i, p, ok) {
			s.sign(&out.Holders[i])
		}
	}
	if len(out.Holders) > 0 {
		out.Lease = &out.Holders[0]
	}
	return out, nil
}

// sign sets l.Signed as a node does (node/signing.go): the proof of l's
// grant under the key the state records for it.
func (s *Service) sign(l *fence.Lease) {
	s.mu.Lock()
	key, clusterID, ok := s.m.LeaseSigner(l.Name, l.Token)
	s.mu.Unlock()
	sign := func(name string) fence.SignedToken {
		if !ok {
			return fence.SignedToken{Token: l.Token}
		}
		return fence.Sign(key, clusterID, name, l.Token)
	}
	if len(l.Locks) == 0 {
		l.Signed, l.Proofs = sign(l.Name), nil
		return
	}
	// A set's lease: one proof per lock (as node/signing.go).
	l.Proofs = make([]fence.SignedToken, len(l.Locks))
	for i, spec := range l.Locks {
		l.Proofs[i] = sign(spec.Name)
	}
	l.Signed = l.Proofs[0]
}

// verifySigned checks a write's signed token (if it carries one) against
// the state's key set, as a node does before proposing.
func (s *Service) verifySigned(st fence.SignedToken, resource string) error {
	if !st.Signed() {
		return nil
	}
	s.mu.Lock()
	ks := s.m.KeySet()
	s.mu.Unlock()
	return ks.Verify(st, resource)
}

func (s *Service) List(ctx context.Context, req fence.ListRequest) (fence.LockPage, error) {
	if err := req.Validate(s.limits()); err != nil {
		return fence.LockPage{}, err
	}
	var locks []state.LockInfo
	var next string
	if err := s.read(ctx, func(m *state.Machine, now int64) { locks, next = m.LocksPage(req.Prefix, req.After, req.Limit, now) }); err != nil {
		return fence.LockPage{}, err
	}
	page := fence.LockPage{Locks: make([]fence.LockInfo, 0, len(locks)), Next: next}
	for _, li := range locks {
		page.Locks = append(page.Locks, lockInfo(li))
	}
	return page, nil
}

func (s *Service) Write(ctx context.Context, req fence.WriteRequest) (fence.Written, error) {
	if err := req.Validate(s.limits()); err != nil {
		return fence.Written{}, err
	}
	if err := s.verifySigned(req.Signed, req.Resource); err != nil {
		return fence.Written{}, err
	}
	return s.written(ctx, bind(state.Command{Op: state.OpWrite, Name: req.Resource, Token: req.Token, Value: req.Value, OpID: req.OpID}, req.Session), "write")
}

func (s *Service) Add(ctx context.Context, req fence.AddRequest) (fence.Written, error) {
	if err := req.Validate(s.limits()); err != nil {
		return fence.Written{}, err
	}
	if err := s.verifySigned(req.Signed, req.Resource); err != nil {
		return fence.Written{}, err
	}
	return s.written(ctx, bind(state.Command{Op: state.OpAdd, Name: req.Resource, Token: req.Token, Delta: req.Delta, OpID: req.OpID}, req.Session), "add")
}

func (s *Service) Delete(ctx context.Context, req fence.DeleteRequest) (fence.Written, error) {
	if err := req.Validate(s.limits()); err != nil {
		return fence.Written{}, err
	}
	if err := s.verifySigned(req.Signed, req.Resource); err != nil {
		return fence.Written{}, err
	}
	return s.written(ctx, bind(state.Command{Op: state.OpDelete, Name: req.Resource, Token: req.Token, OpID: req.OpID}, req.Session), "delete")
}

func (s *Service) written(ctx context.Context, cmd state.Command, op string) (fence.Written, error) {
	res, err := outcome(s.Apply(ctx, cmd))
	if err != nil {
		return fence.Written{Replayed: res.Replayed && res.Err != nil}, err
	}
	if res.Resource == nil {
		return fence.Written{}, errors.New("memservice: " + op + " applied without a resource state")
	}
	return fence.Written{State: resourceState(*res.Resource), Value: res.AddValue, Replayed: res.Replayed}, nil
}

func (s *Service) Read(ctx context.Context, resource string) (fence.ResourceState, error) {
	if err := fence.ValidateName("resource", resource); err != nil {
		return fence.ResourceState{}, err
	}
	var rs state.ResourceState
	if err := s.read(ctx, func(m *state.Machine, _ int64) { rs = m.Resource(resource) }); err != nil {
		return fence.ResourceState{}, err
	}
	return resourceState(rs), nil
}

func (s *Service) OpenSession(ctx context.Context, req fence.OpenSessionRequest) (fence.SessionGrant, error) {
	if err := req.Validate(s.limits()); err != nil {
		return fence.SessionGrant{}, err
	}
	return s.session(ctx, state.Command{Op: state.OpSessionOpen, TTL: req.TTL, RequestID: req.RequestID}, "session open applied without a session")
}

func (s *Service) KeepAlive(ctx context.Context, req fence.KeepAliveRequest) (fence.SessionGrant, error) {
	if err := req.Validate(s.limits()); err != nil {
		return fence.SessionGrant{}, err
	}
	cmd := bind(state.Command{Op: state.OpSessionKeepAlive, TTL: req.TTL}, req.Session)
	cmd.Session = req.SessionID()
	return s.session(ctx, cmd, "keepalive applied without a session")
}

func (s *Service) session(ctx context.Context, cmd state.Command, missing string) (fence.SessionGrant, error) {
	res, err := outcome(s.Apply(ctx, cmd))
	if err != nil {
		return fence.SessionGrant{Replayed: res.Replayed && res.Err != nil}, err
	}
	if res.Session == nil {
		return fence.SessionGrant{}, errors.New("memservice: " + missing)
	}
	return fence.SessionGrant{Session: sessionInfo(*res.Session), Replayed: res.Replayed}, nil
}

func (s *Service) CloseSession(ctx context.Context, req fence.CloseSessionRequest) (fence.Released, error) {
	if err := req.Validate(s.limits()); err != nil {
		return fence.Released{}, err
	}
	cmd := bind(state.Command{Op: state.OpSessionClose}, req.Session)
	cmd.Session = req.SessionID()
	res, err := outcome(s.Apply(ctx, cmd))
	return fence.Released{Replayed: res.Replayed && (err == nil || res.Err != nil)}, err
}

// lockInfo: Holders is the lease alone until state.LockInfo reports every
// holder (as node/service.go).
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
