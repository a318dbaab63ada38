package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/cluster/clusterapi"
	"github.com/fenceworks/fence/node"
)

// Leadership is what the forwarder asks of the local node (*node.Node has
// it): whether it serves calls itself, and who leads otherwise.
type Leadership interface {
	// IsLeader: the node leads and is in office (its clock runs).
	IsLeader() bool
	// Leader is the current leader's id and raft address ("" unknown).
	Leader() (id, raftAddr string)
	// ID is this node's id.
	ID() string
}

// Forwarder is the fence.Service a node's server serves: the local node's
// own Service while the node leads and is in office, otherwise the remote
// Service (RemoteFunc) of the current leader, reached through the leader's
// raft port: it answers what the leader answered, every field of it. Clients may therefore call any node; reads go to the
// leader too (a follower never answers from its own state).
//
// What may be sent where:
//
//   - A call the local node refused with node.ErrNotLeader — nothing was
//     proposed — is sent once to the leader (leadership moved between the
//     check and the call).
//   - A call whose outcome is unknown (node.ErrUnknownOutcome, a broken
//     connection to the leader, the leader answering unavailable) is never
//     sent again: it is returned, as unavailable, and the client retries
//     with its ids, which the state answers exactly.
//   - A call that was itself forwarded (IsForwarded) is not forwarded again:
//     a node that does not lead answers it unavailable.
//
// The remote Service of one leader is kept, with its connections, until the
// leader changes. A Forwarder is safe for concurrent use.
type Forwarder struct {
	local     fence.Service
	node      Leadership
	dial      DialFunc
	newRemote RemoteFunc

	mu     sync.Mutex
	addr   string        // the raft address remote calls
	remote fence.Service // nil until the first forwarded call
}

var _ fence.Service = (*Forwarder)(nil)

// NewForwarder returns the Forwarder of the node n, whose own Service is
// local, reaching other nodes' APIs with dial through the Services remote
// makes.
func NewForwarder(local fence.Service, n Leadership, dial DialFunc, remote RemoteFunc) *Forwarder {
	return &Forwarder{local: local, node: n, dial: dial, newRemote: remote}
}

// Close closes the idle connections to the leader.
func (f *Forwarder) Close() error {
	f.mu.Lock()
	old := f.remote
	f.remote, f.addr = nil, ""
	f.mu.Unlock()
	closeService(old)
	return nil
}

type forwardedKey struct{}

// WithForwarded marks ctx as the context of a forwarded call.
func WithForwarded(ctx context.Context) context.Context {
	return context.WithValue(ctx, forwardedKey{}, true)
}

// IsForwarded reports a forwarded call's context (WithForwarded).
func IsForwarded(ctx context.Context) bool {
	v, _ := ctx.Value(forwardedKey{}).(bool)
	return v
}

// MarkForwarded wraps the API handler: a request with "Fence-Forwarded: 1"
// that came through the peer port (clusterapi.FromPeer) is served under a
// context marked WithForwarded, which the Forwarder answers locally or not
// at all. On the client port the header is ignored.
func MarkForwarded(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(ForwardedHeader) == "1" && clusterapi.FromPeer(r.Context()) {
			r = r.WithContext(WithForwarded(r.Context()))
		}
		h.ServeHTTP(w, r)
	})
}

// ErrNoHop: a forwarded call reached a node that does not lead. It matches
// fence.ErrUnavailable (the client retries, by then at the real leader) and
// node.ErrNotLeader (nothing was proposed).
var ErrNoHop = fmt.Errorf("%w: a forwarded call reached a node that does not lead; it is not passed on again (%w)", fence.ErrUnavailable, node.ErrNotLeader)

// ErrNoLeader: no leader is known to this node (an election is under way,
// or this node is cut off from the majority). It matches
// fence.ErrUnavailable and node.ErrNotLeader: nothing was proposed.
var ErrNoLeader = fmt.Errorf("%w: no leader known (%w)", fence.ErrUnavailable, node.ErrNotLeader)

// errNotInOffice: this node leads but has not taken office yet.
var errNotInOffice = fmt.Errorf("%w: this node was elected but has not taken office yet (%w)", fence.ErrUnavailable, node.ErrNotLeader)

// route returns the Service for a call now: the local one when this node
// serves it, the leader's remote one otherwise, or why neither can.
func (f *Forwarder) route(ctx context.Context) (svc fence.Service, local bool, err error) {
	if f.node.IsLeader() {
		return f.local, true, nil
	}
	if IsForwarded(ctx) {
		return nil, false, ErrNoHop
	}
	id, addr := f.node.Leader()
	switch {
	case addr == "":
		return nil, false, ErrNoLeader
	case id == f.node.ID():
		return nil, false, errNotInOffice
	}
	return f.remoteFor(addr), false, nil
}

// remoteFor returns the remote Service of the leader at raft address
// addr, made anew when the leader changed.
func (f *Forwarder) remoteFor(addr string) fence.Service {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.remote != nil && f.addr == addr {
		return f.remote
	}
	old := f.remote
	f.addr = addr
	f.remote = f.newRemote(clusterapi.PeerURL(addr), func(ctx context.Context, _, _ string) (net.Conn, error) {
		// A leader cut off by the network drops the connection attempt
		// without an answer: give up while the client's attempt still has
		// time to go to another node.
		ctx, cancel := context.WithTimeout(ctx, DialTimeout)
		defer cancel()
		return f.dial(ctx, addr)
	})
	go closeService(old) // calls in flight on it finish; its idle connections go
	return f.remote
}

func closeService(s fence.Service) {
	if c, ok := s.(io.Closer); ok {
		_ = c.Close()
	}
}

// forward runs call on the Service route picks, and once more on the
// leader when the local node refused it before proposing anything.
func forward[T any](f *Forwarder, ctx context.Context, call func(fence.Service) (T, error)) (T, error) {
	svc, local, err := f.route(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	res, err := call(svc)
	if !local || !refusedBeforeProposing(err) || IsForwarded(ctx) {
		return res, err
	}
	// Leadership left this node between IsLeader and the call, and the
	// node proposed nothing: the leader may take the call.
	svc, local, rerr := f.route(ctx)
	if rerr != nil {
		return res, err
	}
	if local {
		return res, err // it thinks it leads again: let the client retry
	}
	return call(svc)
}

// refusedBeforeProposing: the local node did not lead, and proposed
// nothing (node.ErrNotLeader without node.ErrUnknownOutcome).
func refusedBeforeProposing(err error) bool {
	return errors.Is(err, node.ErrNotLeader) && !errors.Is(err, node.ErrUnknownOutcome)
}

// Acquire implements fence.Service.
func (f *Forwarder) Acquire(ctx context.Context, req fence.AcquireRequest) (fence.Grant, error) {
	return forward(f, ctx, func(s fence.Service) (fence.Grant, error) { return s.Acquire(ctx, req) })
}

// Renew implements fence.Service.
func (f *Forwarder) Renew(ctx context.Context, req fence.RenewRequest) (fence.Grant, error) {
	return forward(f, ctx, func(s fence.Service) (fence.Grant, error) { return s.Renew(ctx, req) })
}

// Release implements fence.Service.
func (f *Forwarder) Release(ctx context.Context, req fence.ReleaseRequest) (fence.Released, error) {
	return forward(f, ctx, func(s fence.Service) (fence.Released, error) { return s.Release(ctx, req) })
}

// Get implements fence.Service.
func (f *Forwarder) Get(ctx context.Context, name string) (fence.LockInfo, error) {
	return forward(f, ctx, func(s fence.Service) (fence.LockInfo, error) { return s.Get(ctx, name) })
}

// List implements fence.Service.
func (f *Forwarder) List(ctx context.Context, req fence.ListRequest) (fence.LockPage, error) {
	return forward(f, ctx, func(s fence.Service) (fence.LockPage, error) { return s.List(ctx, req) })
}

// Write implements fence.Service.
func (f *Forwarder) Write(ctx context.Context, req fence.WriteRequest) (fence.Written, error) {
	return forward(f, ctx, func(s fence.Service) (fence.Written, error) { return s.Write(ctx, req) })
}

// Add implements fence.Service.
func (f *Forwarder) Add(ctx context.Context, req fence.AddRequest) (fence.Written, error) {
	return forward(f, ctx, func(s fence.Service) (fence.Written, error) { return s.Add(ctx, req) })
}

// Delete implements fence.Service.
func (f *Forwarder) Delete(ctx context.Context, req fence.DeleteRequest) (fence.Written, error) {
	return forward(f, ctx, func(s fence.Service) (fence.Written, error) { return s.Delete(ctx, req) })
}

// Read implements fence.Service.
func (f *Forwarder) Read(ctx context.Context, resource string) (fence.ResourceState, error) {
	return forward(f, ctx, func(s fence.Service) (fence.ResourceState, error) { return s.Read(ctx, resource) })
}

// OpenSession implements fence.Service.
func (f *Forwarder) OpenSession(ctx context.Context, req fence.OpenSessionRequest) (fence.SessionGrant, error) {
	return forward(f, ctx, func(s fence.Service) (fence.SessionGrant, error) { return s.OpenSession(ctx, req) })
}

// KeepAlive implements fence.Service.
func (f *Forwarder) KeepAlive(ctx context.Context, req fence.KeepAliveRequest) (fence.SessionGrant, error) {
	return forward(f, ctx, func(s fence.Service) (fence.SessionGrant, error) { return s.KeepAlive(ctx, req) })
}

// CloseSession implements fence.Service.
func (f *Forwarder) CloseSession(ctx context.Context, req fence.CloseSessionRequest) (fence.Released, error) {
	return forward(f, ctx, func(s fence.Service) (fence.Released, error) { return s.CloseSession(ctx, req) })
}
