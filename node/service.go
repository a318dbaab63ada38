package node

import (
	"context"
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/internal/reqcheck"
	"github.com/fenceworks/fence/state"
)

// Service is the node as a fence.Service: each call is the state.Command
// it proposes (Apply) or the linearizable read it makes, and its answer is
// made of the applied state.Result.
//
// It validates nothing twice: the machine validates every command as it
// applies it, with the same fence.Invalid field names and bounds the
// server uses (state/validate.go), and against the rules recorded in the
// log, so a bad field given here directly costs a log entry that changes
// nothing (the server refuses bad requests before they get here). Checked
// here, before proposing, is only what the machine does not check in the
// server's words (package internal/reqcheck: a SessionRef's shape, the
// session a KeepAlive or Close must name, the ttl an open or an acquire
// without a session must set) and the reads' arguments (Get, Read, List
// propose nothing).
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

// checkRef checks a mutation's SessionRef as the server does (the
// machine would refuse the same refs, in other words).
func checkRef(ref fence.SessionRef) error {
	return reqcheck.SessionRef(ref, "session.id", "session.ack")
}

func bind(cmd state.Command, ref fence.SessionRef) state.Command {
	cmd.Session, cmd.Seq, cmd.Ack = ref.ID, ref.Seq, ref.Ack
	return cmd
}

func (s nodeService) Acquire(ctx context.Context, req fence.AcquireRequest) (fence.Grant, error) {
	if err := checkRef(req.Session); err != nil {
		return fence.Grant{}, err
	}
	if req.Session.ID != 0 && req.TTL != 0 {
		// As the server refuses it (reqcheck): name and owner first.
		err := fence.ValidateName("name", req.Name)
		if err == nil {
			err = fence.ValidateOwner(req.Owner)
		}
		if err == nil {
			err = reqcheck.AcquireTTLWithSession(req.Session.ID, req.TTL)
		}
		return fence.Grant{}, err
	}
	if req.Session.ID == 0 && req.TTL == 0 {
		// In the server's (and the machine's) order: name and owner
		// are judged before ttl.
		err := fence.ValidateName("name", req.Name)
		if err == nil {
			err = fence.ValidateOwner(req.Owner)
		}
		if err == nil {
			err = reqcheck.AcquireTTLRequired(s.n.Rules().MaxTTL)
		}
		return fence.Grant{}, err
	}
	cmd := bind(state.Command{
		Op: state.OpAcquire, Name: req.Name, Owner: req.Owner, TTL: req.TTL, Wait: req.Wait,
		LockDelay: req.LockDelay, RequestID: req.RequestID,
	}, req.Session)
	if cmd.RequestID == "" && cmd.Session != 0 && cmd.Seq != 0 {
		// The id the machine gives it: its waiter is registered under
		// it, so a retry of the seq (maybe on another stream while this
		// one still waits) is answered where it waits. (Apply does the
		// same; it is said here because the adapter owns the mapping.)
		cmd.RequestID = state.SessionRequestID(cmd.Session, cmd.Seq)
	}
	return s.grant(ctx, cmd, "acquire applied without a lease")
}

func (s nodeService) Renew(ctx context.Context, req fence.RenewRequest) (fence.Grant, error) {
	if err := checkRef(req.Session); err != nil {
		return fence.Grant{}, err
	}
	cmd := bind(state.Command{Op: state.OpRenew, Name: req.Name, Token: req.Token, TTL: req.TTL}, req.Session)
	return s.grant(ctx, cmd, "renew applied without a lease")
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
	if res.Session != nil {
		si := sessionInfo(*res.Session)
		g.Session = &si
	}
	return g, nil
}

func (s nodeService) Release(ctx context.Context, req fence.ReleaseRequest) (fence.Released, error) {
	if err := checkRef(req.Session); err != nil {
		return fence.Released{}, err
	}
	res, err := outcome(s.n.Apply(ctx, bind(state.Command{Op: state.OpRelease, Name: req.Name, Token: req.Token}, req.Session)))
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
	return lockInfo(li), nil
}

func (s nodeService) List(ctx context.Context, req fence.ListRequest) (fence.LockPage, error) {
	if err := checkList(req); err != nil {
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
	if err := checkRef(req.Session); err != nil {
		return fence.Written{}, err
	}
	return s.written(ctx, bind(state.Command{Op: state.OpWrite, Name: req.Resource, Token: req.Token, Value: req.Value, OpID: req.OpID}, req.Session), "write")
}

func (s nodeService) Add(ctx context.Context, req fence.AddRequest) (fence.Written, error) {
	if err := checkRef(req.Session); err != nil {
		return fence.Written{}, err
	}
	return s.written(ctx, bind(state.Command{Op: state.OpAdd, Name: req.Resource, Token: req.Token, Delta: req.Delta, OpID: req.OpID}, req.Session), "add")
}

func (s nodeService) Delete(ctx context.Context, req fence.DeleteRequest) (fence.Written, error) {
	if err := checkRef(req.Session); err != nil {
		return fence.Written{}, err
	}
	return s.written(ctx, bind(state.Command{Op: state.OpDelete, Name: req.Resource, Token: req.Token, OpID: req.OpID}, req.Session), "delete")
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
	if req.TTL == 0 {
		return fence.SessionGrant{}, reqcheck.TTLRequired(s.n.Rules().MaxTTL)
	}
	cmd := state.Command{Op: state.OpSessionOpen, TTL: req.TTL, RequestID: req.RequestID}
	return s.session(ctx, cmd, "session open applied without a session")
}

func (s nodeService) KeepAlive(ctx context.Context, req fence.KeepAliveRequest) (fence.SessionGrant, error) {
	cmd, err := sessionCommand(state.Command{Op: state.OpSessionKeepAlive, TTL: req.TTL}, req.ID, req.Session)
	if err != nil {
		return fence.SessionGrant{}, err
	}
	return s.session(ctx, cmd, "keepalive applied without a session")
}

// sessionCommand binds a keepalive or close to its session: id, or
// ref.ID when id is 0; both set must agree.
func sessionCommand(cmd state.Command, id uint64, ref fence.SessionRef) (state.Command, error) {
	if id != 0 && ref.ID != 0 && id != ref.ID {
		return cmd, fence.Invalid("session_ref.id", "0 or session ("+strconv.FormatUint(id, 10)+")", strconv.FormatUint(ref.ID, 10))
	}
	if id != 0 && ref.ID == 0 {
		ref.ID = id
	}
	if err := reqcheck.SessionRef(ref, "session", "session_ref.ack"); err != nil {
		return cmd, err
	}
	if err := reqcheck.Session(ref.ID); err != nil {
		return cmd, err
	}
	cmd = bind(cmd, ref)
	if id != 0 {
		cmd.Session = id
	}
	return cmd, nil
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
	cmd, err := sessionCommand(state.Command{Op: state.OpSessionClose}, req.ID, req.Session)
	if err != nil {
		return fence.Released{}, err
	}
	res, err := outcome(s.n.Apply(ctx, cmd))
	return fence.Released{Replayed: res.Replayed && (err == nil || res.Err != nil)}, err
}

// checkList checks what the machine does not (reads propose nothing): a
// prefix may be empty, else is like a name; after is a name or ""; limit
// is 1 or more.
func checkList(req fence.ListRequest) error {
	switch {
	case len(req.Prefix) > fence.MaxNameBytes:
		return fence.Invalid("prefix", "at most "+strconv.Itoa(fence.MaxNameBytes)+" bytes", "("+strconv.Itoa(len(req.Prefix))+" bytes)")
	case !utf8.ValidString(req.Prefix):
		return fence.Invalid("prefix", "valid UTF-8", "")
	case req.Limit < 1:
		return fence.Invalid("limit", "1 or more", strconv.Itoa(req.Limit))
	}
	if req.After != "" {
		return fence.ValidateName("after", req.After)
	}
	return nil
}

func lockInfo(li state.LockInfo) fence.LockInfo {
	return fence.LockInfo{Name: li.Name, Lease: li.Lease, Waiters: li.Waiters, LockDelayRemaining: li.LockDelayRemaining, LastToken: li.LastToken}
}

func resourceState(rs state.ResourceState) fence.ResourceState {
	return fence.ResourceState{Resource: rs.Resource, Value: rs.Value, LastToken: rs.LastToken, Version: rs.Version, Deleted: rs.Deleted}
}

func sessionInfo(si state.SessionInfo) fence.SessionInfo {
	return fence.SessionInfo{ID: si.ID, TTL: si.TTL, Remaining: si.Remaining, Leases: si.Leases}
}
