package servicetest

import (
	"context"
	"time"

	"github.com/fenceworks/fence"
)

// boundaryTable is the lock-boundary conformance table (issue 23): a set,
// shared holders and permits, standalone and on a session, answered alike
// by every fence.Service. Tokens are deterministic on a fresh store. It
// needs the state's sets, modes and permits.
var boundaryTable = []step{
	{"a set, listed out of order", keep("set", fence.AcquireRequest{Owner: "o1", TTL: 10 * time.Second, RequestID: "set1",
		Locks: []fence.LockSpec{{Name: "sku/2"}, {Name: "catalog", Mode: fence.Shared}, {Name: "sku/1"}}}),
		[]string{"Name:catalog ", "Token:1 ", "Locks:[{Name:catalog Mode:shared Permits:0} {Name:sku/1 Mode:exclusive Permits:0} {Name:sku/2 Mode:exclusive Permits:0}]",
			"Proofs:[1.signed.key.c2ln 1.signed.key.c2ln 1.signed.key.c2ln]", "Replayed:false"}},
	{"the set retried by request_id", acquire(fence.AcquireRequest{Owner: "o1", TTL: 10 * time.Second, RequestID: "set1",
		Locks: []fence.LockSpec{{Name: "sku/2"}, {Name: "catalog", Mode: fence.Shared}, {Name: "sku/1"}}}),
		[]string{"Token:1 ", "Locks:[{Name:catalog", "Replayed:true"}},
	{"a lock of the set: busy", acquire(fence.AcquireRequest{Name: "sku/1", Owner: "o2", TTL: 10 * time.Second}),
		[]string{"BUSY", "Holder:o1", "Token:1 "}},
	{"another set overlapping it: busy, nothing taken", acquire(fence.AcquireRequest{Owner: "o2", TTL: 10 * time.Second,
		Locks: []fence.LockSpec{{Name: "sku/3"}, {Name: "sku/2"}}}), []string{"BUSY"}},
	{"sku/3 still free", func(ctx context.Context, r *run) (any, error) { return r.svc.Get(ctx, "sku/3") },
		[]string{"Lease:<nil>", "LastToken:0"}},
	{"shared beside the set", keep("reader", fence.AcquireRequest{Name: "catalog", Mode: fence.Shared, Owner: "o3", TTL: 10 * time.Second}),
		[]string{"Token:2 ", "Mode:shared"}},
	{"exclusive beside shared holders: busy", acquire(fence.AcquireRequest{Name: "catalog", Owner: "o4", TTL: 10 * time.Second}),
		[]string{"BUSY"}},
	{"get catalog: both holders in grant order", func(ctx context.Context, r *run) (any, error) { return r.svc.Get(ctx, "catalog") },
		[]string{"Holders:[{Name:catalog Owner:o1 Token:1 ", "Owner:o3 Token:2 ", "LastToken:2"}},
	{"renew the set by its second name", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Renew(ctx, fence.RenewRequest{Name: "sku/1", Token: r.tokens["set"], TTL: 20 * time.Second})
	}, []string{"TTL:20s", "Locks:[{Name:catalog"}},
	{"release the set by its last name", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Release(ctx, fence.ReleaseRequest{Name: "sku/2", Token: r.tokens["set"]})
	}, []string{"Replayed:false"}},
	{"sku/1 free again", acquire(fence.AcquireRequest{Name: "sku/1", Owner: "o2", TTL: 10 * time.Second}), []string{"Token:3 "}},
	{"get catalog: the reader alone", func(ctx context.Context, r *run) (any, error) { return r.svc.Get(ctx, "catalog") },
		[]string{"Holders:[{Name:catalog Owner:o3 Token:2 "}},

	{"permit 1 of 2", acquire(fence.AcquireRequest{Name: "x", Permits: 2, Owner: "p1", TTL: 10 * time.Second}), []string{"Token:4 ", "Permits:2"}},
	{"permit 2 of 2", acquire(fence.AcquireRequest{Name: "x", Permits: 2, Owner: "p2", TTL: 10 * time.Second}), []string{"Token:5 ", "Permits:2"}},
	{"no permit 3 of 2", acquire(fence.AcquireRequest{Name: "x", Permits: 2, Owner: "p3", TTL: 10 * time.Second}), []string{"BUSY"}},
	{"another permit count", acquire(fence.AcquireRequest{Name: "x", Permits: 3, Owner: "p3", TTL: 10 * time.Second}),
		[]string{"PERMITS_MISMATCH", "{Name:x Permits:3 Current:2}"}},
	{"no permits on a semaphore", acquire(fence.AcquireRequest{Name: "x", Owner: "p3", TTL: 10 * time.Second}),
		[]string{"PERMITS_MISMATCH", "{Name:x Permits:0 Current:2}"}},
	{"get x: two holders of 2 permits", func(ctx context.Context, r *run) (any, error) { return r.svc.Get(ctx, "x") },
		[]string{"Owner:p1 Token:4 ", "Owner:p2 Token:5 ", "Permits:2 "}},

	{"open a session", func(ctx context.Context, r *run) (any, error) {
		g, err := r.svc.OpenSession(ctx, fence.OpenSessionRequest{TTL: 10 * time.Second})
		r.session = g.Session.ID
		return g, err
	}, []string{"Replayed:false"}},
	{"a set on the session, seq 1", func(ctx context.Context, r *run) (any, error) {
		g, err := r.svc.Acquire(ctx, fence.AcquireRequest{Locks: []fence.LockSpec{{Name: "s/b"}, {Name: "s/a"}}, Session: r.ref(1, 1)})
		r.tokens["sset"] = g.Lease.Token
		return g, err
	}, []string{"Name:s/a ", "Locks:[{Name:s/a Mode:exclusive Permits:0} {Name:s/b Mode:exclusive Permits:0}]", "Replayed:false"}},
	{"seq 1 again: the saved set", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Acquire(ctx, fence.AcquireRequest{Locks: []fence.LockSpec{{Name: "s/b"}, {Name: "s/a"}}, Session: r.ref(1, 1)})
	}, []string{"Name:s/a ", "Locks:[{Name:s/a", "Token:6 ", "Proofs:[6.signed.key.c2ln 6.signed.key.c2ln]", "Replayed:true"}},
	{"a permit count mismatch on the session, seq 2", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Acquire(ctx, fence.AcquireRequest{Name: "x", Permits: 5, Session: r.ref(2, 2)})
	}, []string{"PERMITS_MISMATCH", "Current:2", "Replayed:false"}},
	{"seq 2 again: the saved refusal", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Acquire(ctx, fence.AcquireRequest{Name: "x", Permits: 5, Session: r.ref(2, 2)})
	}, []string{"PERMITS_MISMATCH", "Current:2", "Replayed:true"}},
	{"close the session: the set is freed", func(ctx context.Context, r *run) (any, error) {
		return r.svc.CloseSession(ctx, fence.CloseSessionRequest{ID: r.session})
	}, []string{"Replayed:false"}},
	{"s/b free", func(ctx context.Context, r *run) (any, error) { return r.svc.Get(ctx, "s/b") }, []string{"Lease:<nil>"}},
}
