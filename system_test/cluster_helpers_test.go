//go:build e2e

package system_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/testkit/chaos"
	"github.com/fenceworks/fence/testkit/harness"
)

// The multi-process cluster tests (cluster_*_test.go) run three real
// `fence serve` processes on loopback (testkit/harness) with the default
// LAN raft timeouts (election 1s), and talk to them over the API with one
// attempt per call, so that each test decides itself what a retry is: the
// same request, with the same request_id or op_id, on the next node. That
// makes every retry exact and every acknowledgement certain.

// clusterConfig is an n-node cluster with a static --peers list.
func clusterConfig(n int) harness.ClusterConfig {
	return harness.ClusterConfig{
		N: n,
		// A generous ready timeout: under -race on a busy machine a first
		// election can take several seconds.
		Args:         []string{"--ready-timeout", "60s"},
		ReadyTimeout: hangGuard,
		StopTimeout:  hangGuard,
	}
}

// attemptTimeout bounds one call to one node: a dead, paused or cut-off
// node must not hold a worker longer.
const attemptTimeout = 3 * time.Second

// nodeAPI is a client of one node's client port (Connect, HTTP/1.1), one
// attempt per call.
func nodeAPI(url string) api {
	hc := &http.Client{Timeout: attemptTimeout}
	return api{
		Locks:     fencev1connect.NewLockServiceClient(hc, url),
		Resources: fencev1connect.NewResourceServiceClient(hc, url),
	}
}

// isRefusal: the server answered with a definite refusal (a typed fence
// error or a bad request), so the call's outcome is known and retrying it
// elsewhere would change nothing. Anything else (unavailable, a timeout, a
// broken connection) leaves the outcome unknown.
func isRefusal(err error) bool {
	if errorDetail(err) != nil {
		return true
	}
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeNotFound,
		connect.CodeAlreadyExists, connect.CodePermissionDenied, connect.CodeOutOfRange,
		connect.CodeUnimplemented:
		return true
	}
	return false
}

// reason is the refusal's ErrorDetail reason ("" if none).
func reason(err error) string { return errorDetail(err).GetReason() }

// failover sends each call to one node and, when the outcome is unknown,
// the same call (same ids) to the next node, until it gets an answer or ctx
// ends. It sticks to the node that last answered.
type failover struct {
	mu   sync.Mutex
	urls []string
	apis []api
	cur  int
}

func newFailover(urls []string) *failover {
	f := &failover{urls: urls}
	for _, u := range urls {
		f.apis = append(f.apis, nodeAPI(u))
	}
	return f
}

// do runs call until it returns nil or a refusal; unknown outcomes are
// retried on the next node after a short pause. The error is the refusal,
// or ctx's error with the last unknown outcome.
func (f *failover) do(ctx context.Context, call func(ctx context.Context, a api) error) error {
	for {
		f.mu.Lock()
		i := f.cur
		a := f.apis[i]
		f.mu.Unlock()
		err := call(ctx, a)
		if err == nil || isRefusal(err) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (last attempt, on %s: %v)", ctx.Err(), f.urls[i], err)
		}
		f.mu.Lock()
		if f.cur == i {
			f.cur = (i + 1) % len(f.apis)
		}
		f.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func newID() string { return rand.Text() }

func acquireReq(name, owner, requestID string, ttl, wait time.Duration) *fencev1.AcquireRequest {
	req := &fencev1.AcquireRequest{Name: name, Owner: owner, Ttl: durationpb.New(ttl), RequestId: requestID}
	if wait > 0 {
		req.Wait = durationpb.New(wait)
	}
	return req
}

// acquireOnce is one attempt at an acquire on a.
func acquireOnce(ctx context.Context, a api, req *fencev1.AcquireRequest) (*fencev1.Lease, error) {
	resp, err := a.Locks.Acquire(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return resp.Msg.GetLease(), nil
}

// acquire is an exact acquire through f: every attempt carries the same
// request_id, so a grant whose reply was lost is returned by the retry.
func (f *failover) acquire(ctx context.Context, name, owner string, ttl, wait time.Duration) (*fencev1.Lease, error) {
	req := acquireReq(name, owner, newID(), ttl, wait)
	var l *fencev1.Lease
	err := f.do(ctx, func(ctx context.Context, a api) (err error) {
		l, err = acquireOnce(ctx, a, req)
		return err
	})
	return l, err
}

// write is an exact write through f (one op_id for every attempt).
func (f *failover) write(ctx context.Context, resource string, token uint64, value string) (*fencev1.ResourceState, error) {
	req := &fencev1.WriteRequest{Resource: resource, Token: token, Value: []byte(value), OpId: newID()}
	var st *fencev1.ResourceState
	err := f.do(ctx, func(ctx context.Context, a api) error {
		resp, err := a.Resources.Write(ctx, connect.NewRequest(req))
		if err == nil {
			st = resp.Msg.GetState()
		}
		return err
	})
	return st, err
}

// release releases through f. A retry after an unknown outcome may find the
// lease already released by the earlier attempt (NOT_HOLDER): that counts
// as released.
func (f *failover) release(ctx context.Context, name string, token uint64) error {
	unknown := false
	return f.do(ctx, func(ctx context.Context, a api) error {
		err := a.release(ctx, name, token)
		if err != nil && unknown && reason(err) == "NOT_HOLDER" {
			return nil
		}
		if err != nil && !isRefusal(err) {
			unknown = true
		}
		return err
	})
}

// renew renews the lease of name held by token (its TTL unchanged).
func renewOnce(ctx context.Context, a api, name string, token uint64) (*fencev1.Lease, error) {
	resp, err := a.Locks.Renew(ctx, connect.NewRequest(&fencev1.RenewRequest{Name: name, Token: token}))
	if err != nil {
		return nil, err
	}
	return resp.Msg.GetLease(), nil
}

func (f *failover) get(ctx context.Context, name string) (*fencev1.LockInfo, error) {
	var li *fencev1.LockInfo
	err := f.do(ctx, func(ctx context.Context, a api) (err error) {
		li, err = a.get(ctx, name)
		return err
	})
	return li, err
}

func (f *failover) read(ctx context.Context, resource string) (*fencev1.ResourceState, error) {
	var st *fencev1.ResourceState
	err := f.do(ctx, func(ctx context.Context, a api) (err error) {
		st, err = a.read(ctx, resource)
		return err
	})
	return st, err
}

// waitLeader waits for the cluster to agree on a leader other than those
// in not, failing t after hangGuard.
func waitLeader(t testing.TB, c *harness.Cluster, not ...*harness.Server) *harness.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	l, err := c.WaitLeader(ctx, not...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// waitConverged waits until every running member reports the same applied
// index and last token as the leader's commit index (nothing in flight):
// the replicas hold the same state. It returns the last token.
func waitConverged(t testing.TB, c *harness.Cluster) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	var last string
	for {
		l, err := c.Leader(ctx)
		if err == nil {
			st, err := l.Status(ctx)
			if err == nil {
				same := true
				last = fmt.Sprintf("leader %s commit %d last_token %d;", l.ID(), st.CommitIndex, st.LastToken)
				for _, n := range c.Members() {
					if !n.Running() {
						continue
					}
					ns, err := n.Status(ctx)
					if err != nil {
						same = false
						last += fmt.Sprintf(" %s: %v;", n.ID(), err)
						continue
					}
					last += fmt.Sprintf(" %s applied %d last_token %d;", n.ID(), ns.AppliedIndex, ns.LastToken)
					same = same && ns.AppliedIndex >= st.CommitIndex && ns.LastToken == st.LastToken
				}
				if same {
					return st.LastToken
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the replicas did not converge: %s", last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// links are the proxies on the directed peer links of a cluster: from -> to
// -> proxy. Each node dials its peers' raft addresses through them
// (FENCE_TEST_DIAL_MAP), raft and forwarded API calls alike.
type links struct {
	mu sync.Mutex
	p  map[string]map[string]*chaos.Proxy
}

// linkHook is ClusterConfig.Link: a chaos.Proxy per directed link, closed
// at the end of the test.
func (l *links) linkHook(t testing.TB) func(from, to, toRaftAddr string) (string, error) {
	return func(from, to, toRaftAddr string) (string, error) {
		p, err := chaos.NewProxy(from+"->"+to, toRaftAddr)
		if err != nil {
			return "", err
		}
		t.Cleanup(func() { p.Close() })
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.p == nil {
			l.p = map[string]map[string]*chaos.Proxy{}
		}
		if l.p[from] == nil {
			l.p[from] = map[string]*chaos.Proxy{}
		}
		l.p[from][to] = p
		return p.Addr(), nil
	}
}

// isolate cuts every link to and from node id (both directions dropped).
func (l *links) isolate(t testing.TB, id string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for from, m := range l.p {
		for to, p := range m {
			if from == id || to == id {
				if err := p.Blackhole(chaos.Both); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// heal removes every fault.
func (l *links) heal(t testing.TB) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for _, m := range l.p {
		for _, p := range m {
			errs = append(errs, p.Heal())
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}
