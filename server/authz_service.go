package server

import (
	"context"
	"log/slog"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

// authzService is the Service the handlers call (Server.svc): each call is
// authenticated and its permission checked on its name (auth.go) before
// the node's Service is asked, with the caller's principal in the context
// for the node to record and check ownership with. Every path that serves
// a lock, resource or session call (unary Connect, gRPC, gRPC-Web, plain
// JSON, the session stream, a follower's forwarded call) goes through it.
//
// Permissions: lock on the lock's name for acquire (on every name of a
// set), renew, release; lock
// on any prefix to open, keep alive or close a session; read on the
// lock's or resource's name for Get and Read; read on a prefix that starts
// the requested prefix for List (a List whose prefix is wider than what
// the caller may read is refused, not filtered); write on the resource's
// name for Write, Add, Delete.
type authzService struct {
	s     *Server
	inner fence.Service
}

func (a authzService) check(ctx context.Context, method string, kind state.PermKind, name string) (context.Context, error) {
	return a.s.authorize(ctx, method, kind, name)
}

// done audits a refusal the node made on ownership grounds.
func (a authzService) done(ctx context.Context, method, name string, err error) error {
	if err != nil {
		a.s.auditRefusal(ctx, method, name, err)
	}
	return err
}

// Acquire needs lock on its name, or on every name of a set (req.Locks),
// checked in the order the request lists them: the refusal names the
// first the caller may not lock.
func (a authzService) Acquire(ctx context.Context, req fence.AcquireRequest) (fence.Grant, error) {
	name := req.Name
	if len(req.Locks) > 0 && name == "" {
		name = req.Locks[0].Name
	}
	ctx, err := a.check(ctx, "Acquire", state.PermLock, name)
	if err != nil {
		return fence.Grant{}, err
	}
	if req.Name == "" {
		for _, s := range req.Locks[min(1, len(req.Locks)):] {
			if _, err := a.check(ctx, "Acquire", state.PermLock, s.Name); err != nil {
				return fence.Grant{}, err
			}
		}
	}
	g, err := a.inner.Acquire(ctx, req)
	return g, a.done(ctx, "Acquire", name, err)
}

func (a authzService) Renew(ctx context.Context, req fence.RenewRequest) (fence.Grant, error) {
	ctx, err := a.check(ctx, "Renew", state.PermLock, req.Name)
	if err != nil {
		return fence.Grant{}, err
	}
	g, err := a.inner.Renew(ctx, req)
	return g, a.done(ctx, "Renew", req.Name, err)
}

func (a authzService) Release(ctx context.Context, req fence.ReleaseRequest) (fence.Released, error) {
	ctx, err := a.check(ctx, "Release", state.PermLock, req.Name)
	if err != nil {
		return fence.Released{}, err
	}
	holder := a.otherHolder(ctx, req.Name, req.Token)
	r, err := a.inner.Release(ctx, req)
	if err == nil && holder != "" {
		p, _ := fence.PrincipalFrom(ctx)
		a.s.auditAction(ctx, "Release", p.Name, req.Name, slog.Uint64("token", uint64(req.Token)), slog.String("holder", holder))
	}
	return r, a.done(ctx, "Release", req.Name, err)
}

// otherHolder is the principal of the lease with token on name when an
// authenticated admin (checking on, not a peer's forwarded call) releases
// a lease another principal holds: such a release is audited. "" else
// (the common case: a holder releasing its own lease, read nothing).
func (a authzService) otherHolder(ctx context.Context, name string, token fence.Token) string {
	id, _ := ctx.Value(identityKey{}).(identity)
	if !id.Admin || id.trusted || a.s.deps.Auth == nil {
		return ""
	}
	var holder string
	a.s.deps.Auth.ReadAuth(func(m *state.Machine) {
		li := m.LockHeld(name, m.Now())
		for i, h := range li.Holders {
			if h.Token == token && li.Principals[i] != id.Name {
				holder = li.Principals[i]
			}
		}
	})
	return holder
}

func (a authzService) Get(ctx context.Context, name string) (fence.LockInfo, error) {
	ctx, err := a.check(ctx, "Get", state.PermRead, name)
	if err != nil {
		return fence.LockInfo{}, err
	}
	return a.inner.Get(ctx, name)
}

func (a authzService) List(ctx context.Context, req fence.ListRequest) (fence.LockPage, error) {
	ctx, err := a.check(ctx, "List", state.PermRead, req.Prefix)
	if err != nil {
		return fence.LockPage{}, err
	}
	return a.inner.List(ctx, req)
}

// A write's reply carries the resource's value: a saved result (a
// replayed op_id, maybe another principal's) as much as the caller's own.
// A caller without read permission on the resource gets the reply without
// the value; Add, whose answer is the value, needs read as well as write.

func (a authzService) Write(ctx context.Context, req fence.WriteRequest) (fence.Written, error) {
	ctx, err := a.check(ctx, "Write", state.PermWrite, req.Resource)
	if err != nil {
		return fence.Written{}, err
	}
	w, err := a.inner.Write(ctx, req)
	return a.unlessReadable(ctx, req.Resource, w), a.done(ctx, "Write", req.Resource, err)
}

func (a authzService) Add(ctx context.Context, req fence.AddRequest) (fence.Written, error) {
	ctx, err := a.check(ctx, "Add", state.PermWrite, req.Resource)
	if err != nil {
		return fence.Written{}, err
	}
	if _, err := a.check(ctx, "Add", state.PermRead, req.Resource); err != nil {
		return fence.Written{}, err
	}
	w, err := a.inner.Add(ctx, req)
	return w, a.done(ctx, "Add", req.Resource, err)
}

func (a authzService) Delete(ctx context.Context, req fence.DeleteRequest) (fence.Written, error) {
	ctx, err := a.check(ctx, "Delete", state.PermWrite, req.Resource)
	if err != nil {
		return fence.Written{}, err
	}
	w, err := a.inner.Delete(ctx, req)
	return a.unlessReadable(ctx, req.Resource, w), a.done(ctx, "Delete", req.Resource, err)
}

// unlessReadable is w without the resource's value when the caller may
// not read resource.
func (a authzService) unlessReadable(ctx context.Context, resource string, w fence.Written) fence.Written {
	id, err := a.s.identify(ctx, false)
	if err == nil && (id.trusted || id.Admin || allows(id.perms, state.PermRead, resource)) {
		return w
	}
	w.State.Value, w.Value = nil, 0
	return w
}

func (a authzService) Read(ctx context.Context, resource string) (fence.ResourceState, error) {
	ctx, err := a.check(ctx, "Read", state.PermRead, resource)
	if err != nil {
		return fence.ResourceState{}, err
	}
	return a.inner.Read(ctx, resource)
}

func (a authzService) OpenSession(ctx context.Context, req fence.OpenSessionRequest) (fence.SessionGrant, error) {
	ctx, err := a.check(ctx, "OpenSession", state.PermLock, anyName)
	if err != nil {
		return fence.SessionGrant{}, err
	}
	g, err := a.inner.OpenSession(ctx, req)
	return g, a.done(ctx, "OpenSession", "", err)
}

func (a authzService) KeepAlive(ctx context.Context, req fence.KeepAliveRequest) (fence.SessionGrant, error) {
	ctx, err := a.check(ctx, "KeepAlive", state.PermLock, anyName)
	if err != nil {
		return fence.SessionGrant{}, err
	}
	g, err := a.inner.KeepAlive(ctx, req)
	return g, a.done(ctx, "KeepAlive", "", err)
}

func (a authzService) CloseSession(ctx context.Context, req fence.CloseSessionRequest) (fence.Released, error) {
	ctx, err := a.check(ctx, "CloseSession", state.PermLock, anyName)
	if err != nil {
		return fence.Released{}, err
	}
	r, err := a.inner.CloseSession(ctx, req)
	return r, a.done(ctx, "CloseSession", "", err)
}
