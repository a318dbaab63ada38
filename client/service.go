package client

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// Service is fence.Service over the network: each method is one call to
// the Fence server at one URL, with no retry, no session of its own and no
// keepalive. A Fence node uses it to pass calls on to its leader; it is the
// remote implementation of fence.Service, not a friendlier Client.
//
// It keeps fence.Service's contract as the server answers it:
//
//   - a refusal is returned as the typed error the server sent
//     (errors.Is(err, fence.ErrStaleToken), errors.As(err,
//     &*fence.StaleTokenError) with its facts, and the server's message);
//     the *connect.Error that carried it is in the chain too, so that a
//     server passing the error on (apierr.ToConnect) sends it unchanged;
//   - every other failure (cannot connect, the connection broke, the
//     server answered Unavailable or anything that is not a refusal, ctx
//     ended) wraps fence.ErrUnavailable: the outcome is unknown, and the
//     caller retries with the same RequestID, OpID or session Seq.
//   - every field of an answer is carried, so a call answered through
//     Service returns what the server's own Service returned: a
//     session-bound Renew's Grant.Session, SessionInfo.Leases, and the
//     Replayed of a refusal (the saved refusal of a retried session seq,
//     ErrorDetail.replayed).
type Service struct {
	url   string
	err   error // the URL did not parse: every call fails with it
	hc    *http.Client
	ownHC bool // hc is ours: Close closes its idle connections

	locks     fencev1connect.LockServiceClient
	resources fencev1connect.ResourceServiceClient
	sessions  fencev1connect.SessionServiceClient
}

var _ fence.Service = (*Service)(nil)

// NewService returns the remote fence.Service of the server at url (one
// URL, such as "http://127.0.0.1:7420"). It speaks HTTP/2 (cleartext, with
// prior knowledge, for http://) over its own transport, unless
// WithHTTPClient gives one; WithDialer opens its connections (a node dials
// its leader's API over the raft port's mux), WithHeader marks its requests
// (a node's forwarded calls), WithProtocol chooses the wire protocol. Other
// options do not apply. A url that is not one http(s) URL makes every call
// fail with a *fence.InvalidError for field "url".
func NewService(url string, opts ...Option) fence.Service {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	s := &Service{url: url}
	urls, err := parseEndpoints(url, nil)
	if err == nil && (len(urls) != 1 || strings.Contains(url, ",")) {
		err = fmt.Errorf("one endpoint, got %d", len(urls))
	}
	if err != nil {
		s.err = fence.Invalid("url", "one http:// or https:// URL of a Fence server", url)
		return s
	}
	s.url = urls[0]
	if err := cfg.checkTLS(urls); err != nil {
		s.err = fence.Invalid("url", "an https:// URL (WithTLS was given)", url)
		return s
	}
	s.hc = cfg.httpClient
	if s.hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Protocols = http2Only()
		setTLS(t, cfg.tls)
		// A connection to a leader that went silent (paused, cut off)
		// must not hold calls until their contexts end: after 2s without
		// a frame it is pinged, and closed if the ping is not answered
		// within 2s (its calls fail unavailable; the callers retry).
		t.HTTP2 = &http.HTTP2Config{SendPingTimeout: 2 * time.Second, PingTimeout: 2 * time.Second}
		if cfg.dialer != nil {
			t.DialContext = cfg.dialer
		}
		s.hc, s.ownHC = &http.Client{Transport: t}, true
	}
	copts := cfg.connectOptions()
	s.locks = fencev1connect.NewLockServiceClient(s.hc, s.url, copts...)
	s.resources = fencev1connect.NewResourceServiceClient(s.hc, s.url, copts...)
	s.sessions = fencev1connect.NewSessionServiceClient(s.hc, s.url, copts...)
	return s
}

// URL is the server the Service calls.
func (s *Service) URL() string { return s.url }

// Close closes the idle connections of the Service's own transport. Calls
// in flight finish; later calls open new connections.
func (s *Service) Close() error {
	if s.ownHC {
		s.hc.CloseIdleConnections()
	}
	return nil
}

// remoteErr is fence.Service's error for what a call returned.
func remoteErr(op string, err error) error {
	if err == nil {
		return nil
	}
	typed := apierr.FromConnect(err)
	if fence.ReasonOf(typed) != "" {
		return typed
	}
	return &UnavailableError{Op: op, Err: err}
}

// UnavailableError is a remote call (Service) that failed without a
// refusal: its outcome is unknown. It matches fence.ErrUnavailable, and Err
// is what the transport or the server said (a *connect.Error).
type UnavailableError struct {
	Op  string
	Err error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("fence: %s: unavailable, outcome unknown: %v", e.Op, e.Err)
}

// Unwrap returns fence.ErrUnavailable and Err.
func (e *UnavailableError) Unwrap() []error { return []error{fence.ErrUnavailable, e.Err} }

// Acquire implements fence.Service.
func (s *Service) Acquire(ctx context.Context, req fence.AcquireRequest) (fence.Grant, error) {
	if s.err != nil {
		return fence.Grant{}, s.err
	}
	resp, err := s.locks.Acquire(ctx, connect.NewRequest(acquireToProto(req)))
	if err != nil {
		err = remoteErr("acquire", err)
		return fence.Grant{Replayed: apierr.IsReplayed(err)}, err
	}
	return fence.Grant{Lease: leaseFromProto(resp.Msg.GetLease()), Replayed: resp.Msg.GetReplayed()}, nil
}

// Renew implements fence.Service.
func (s *Service) Renew(ctx context.Context, req fence.RenewRequest) (fence.Grant, error) {
	if s.err != nil {
		return fence.Grant{}, s.err
	}
	resp, err := s.locks.Renew(ctx, connect.NewRequest(renewToProto(req)))
	if err != nil {
		err = remoteErr("renew", err)
		return fence.Grant{Replayed: apierr.IsReplayed(err)}, err
	}
	return fence.Grant{Lease: leaseFromProto(resp.Msg.GetLease()), Replayed: resp.Msg.GetReplayed(), Session: sessionPtrFromProto(resp.Msg.GetSession())}, nil
}

// Release implements fence.Service.
func (s *Service) Release(ctx context.Context, req fence.ReleaseRequest) (fence.Released, error) {
	if s.err != nil {
		return fence.Released{}, s.err
	}
	resp, err := s.locks.Release(ctx, connect.NewRequest(releaseToProto(req)))
	if err != nil {
		err = remoteErr("release", err)
		return fence.Released{Replayed: apierr.IsReplayed(err)}, err
	}
	return fence.Released{Replayed: resp.Msg.GetReplayed()}, nil
}

// Get implements fence.Service.
func (s *Service) Get(ctx context.Context, name string) (fence.LockInfo, error) {
	if s.err != nil {
		return fence.LockInfo{}, s.err
	}
	resp, err := s.locks.Get(ctx, connect.NewRequest(&fencev1.GetRequest{Name: name}))
	if err != nil {
		return fence.LockInfo{}, remoteErr("get", err)
	}
	return fence.LockInfo(lockFromProto(resp.Msg.GetLock())), nil
}

// List implements fence.Service.
func (s *Service) List(ctx context.Context, req fence.ListRequest) (fence.LockPage, error) {
	if s.err != nil {
		return fence.LockPage{}, s.err
	}
	// As the node refuses it (a page_size of 0 would mean the server's
	// default instead).
	if req.Limit < 1 {
		return fence.LockPage{}, fence.Invalid("limit", "1 or more", strconv.Itoa(req.Limit))
	}
	if req.Limit > math.MaxUint32 {
		req.Limit = math.MaxUint32 // the server refuses it by its own bound
	}
	resp, err := s.locks.List(ctx, connect.NewRequest(&fencev1.ListRequest{
		Prefix: req.Prefix, PageSize: uint32(req.Limit), PageToken: apierr.EncodePageToken(req.After),
	}))
	if err != nil {
		return fence.LockPage{}, remoteErr("list", err)
	}
	next, ok := apierr.DecodePageToken(resp.Msg.GetNextPageToken())
	if !ok {
		return fence.LockPage{}, &UnavailableError{Op: "list", Err: fmt.Errorf("the server's next_page_token %q is not one this client knows", resp.Msg.GetNextPageToken())}
	}
	page := fence.LockPage{Locks: make([]fence.LockInfo, 0, len(resp.Msg.GetLocks())), Next: next}
	for _, li := range resp.Msg.GetLocks() {
		page.Locks = append(page.Locks, fence.LockInfo(lockFromProto(li)))
	}
	return page, nil
}

// Write implements fence.Service.
func (s *Service) Write(ctx context.Context, req fence.WriteRequest) (fence.Written, error) {
	if s.err != nil {
		return fence.Written{}, s.err
	}
	resp, err := s.resources.Write(ctx, connect.NewRequest(writeToProto(req)))
	if err != nil {
		err = remoteErr("write", err)
		return fence.Written{Replayed: apierr.IsReplayed(err)}, err
	}
	return fence.Written{State: stateFromProto(resp.Msg.GetState()), Replayed: resp.Msg.GetReplayed()}, nil
}

// Add implements fence.Service.
func (s *Service) Add(ctx context.Context, req fence.AddRequest) (fence.Written, error) {
	if s.err != nil {
		return fence.Written{}, s.err
	}
	resp, err := s.resources.Add(ctx, connect.NewRequest(addToProto(req)))
	if err != nil {
		err = remoteErr("add", err)
		return fence.Written{Replayed: apierr.IsReplayed(err)}, err
	}
	return fence.Written{State: stateFromProto(resp.Msg.GetState()), Value: resp.Msg.GetValue(), Replayed: resp.Msg.GetReplayed()}, nil
}

// Delete implements fence.Service.
func (s *Service) Delete(ctx context.Context, req fence.DeleteRequest) (fence.Written, error) {
	if s.err != nil {
		return fence.Written{}, s.err
	}
	resp, err := s.resources.Delete(ctx, connect.NewRequest(deleteToProto(req)))
	if err != nil {
		err = remoteErr("delete", err)
		return fence.Written{Replayed: apierr.IsReplayed(err)}, err
	}
	return fence.Written{State: stateFromProto(resp.Msg.GetState()), Replayed: resp.Msg.GetReplayed()}, nil
}

// Read implements fence.Service.
func (s *Service) Read(ctx context.Context, resource string) (fence.ResourceState, error) {
	if s.err != nil {
		return fence.ResourceState{}, s.err
	}
	resp, err := s.resources.Read(ctx, connect.NewRequest(&fencev1.ReadRequest{Resource: resource}))
	if err != nil {
		return fence.ResourceState{}, remoteErr("read", err)
	}
	return stateFromProto(resp.Msg.GetState()), nil
}

// OpenSession implements fence.Service.
func (s *Service) OpenSession(ctx context.Context, req fence.OpenSessionRequest) (fence.SessionGrant, error) {
	if s.err != nil {
		return fence.SessionGrant{}, s.err
	}
	resp, err := s.sessions.Open(ctx, connect.NewRequest(openToProto(req)))
	if err != nil {
		err = remoteErr("open session", err)
		return fence.SessionGrant{Replayed: apierr.IsReplayed(err)}, err
	}
	return fence.SessionGrant{Session: sessionFromProto(resp.Msg.GetSession()), Replayed: resp.Msg.GetReplayed()}, nil
}

// KeepAlive implements fence.Service.
func (s *Service) KeepAlive(ctx context.Context, req fence.KeepAliveRequest) (fence.SessionGrant, error) {
	if s.err != nil {
		return fence.SessionGrant{}, s.err
	}
	resp, err := s.sessions.KeepAlive(ctx, connect.NewRequest(keepAliveToProto(req)))
	if err != nil {
		err = remoteErr("keepalive", err)
		return fence.SessionGrant{Replayed: apierr.IsReplayed(err)}, err
	}
	return fence.SessionGrant{Session: sessionFromProto(resp.Msg.GetSession()), Replayed: resp.Msg.GetReplayed()}, nil
}

// CloseSession implements fence.Service.
func (s *Service) CloseSession(ctx context.Context, req fence.CloseSessionRequest) (fence.Released, error) {
	if s.err != nil {
		return fence.Released{}, s.err
	}
	resp, err := s.sessions.Close(ctx, connect.NewRequest(closeToProto(req)))
	if err != nil {
		err = remoteErr("close session", err)
		return fence.Released{Replayed: apierr.IsReplayed(err)}, err
	}
	return fence.Released{Replayed: resp.Msg.GetReplayed()}, nil
}

func stateFromProto(p *fencev1.ResourceState) fence.ResourceState {
	return fence.ResourceState{
		Resource: p.GetResource(), Value: p.GetValue(), LastToken: fence.Token(p.GetLastToken()),
		Version: p.GetVersion(), Deleted: p.GetDeleted(),
	}
}

func sessionFromProto(p *fencev1.Session) fence.SessionInfo {
	return fence.SessionInfo{
		ID: p.GetId(), TTL: p.GetTtl().AsDuration(), Remaining: p.GetRemaining().AsDuration(),
		Leases: int(min(p.GetLeases(), math.MaxInt32)),
	}
}

// sessionPtrFromProto is sessionFromProto of a session that may be absent
// (nil).
func sessionPtrFromProto(p *fencev1.Session) *fence.SessionInfo {
	if p == nil {
		return nil
	}
	si := sessionFromProto(p)
	return &si
}
