package servicetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// Target is one implementation under test, on a fresh, empty store whose
// largest TTL is fence.DefaultMaxTTL.
type Target struct {
	Service fence.Service
	// Stop makes the endpoint go away (the node closed, the server shut
	// down); the table's last calls are made after it.
	Stop func()
}

// Outcome is one call's answer: Value (the result, normalized) or Err (the
// error, normalized), as text.
type Outcome struct {
	Step  string
	Value string
	Err   string
}

func (o Outcome) String() string {
	if o.Err != "" {
		return o.Step + ": error " + o.Err
	}
	return o.Step + ": " + o.Value
}

// run is the state one run of the table carries from call to call.
type run struct {
	svc     fence.Service
	stop    func()
	tokens  map[string]fence.Token
	session uint64
}

// step is one call of the table. want is a list of substrings the
// outcome's text must hold ("" items are skipped).
type step struct {
	name string
	do   func(ctx context.Context, r *run) (any, error)
	want []string
}

// manyLocks is a set of n locks, l0 ... l(n-1).
func manyLocks(n int) []fence.LockSpec {
	out := make([]fence.LockSpec, n)
	for i := range out {
		out[i] = fence.LockSpec{Name: fmt.Sprintf("l%d", i)}
	}
	return out
}

func acquire(req fence.AcquireRequest) func(context.Context, *run) (any, error) {
	return func(ctx context.Context, r *run) (any, error) { return r.svc.Acquire(ctx, req) }
}

// keep records a grant's token under key.
func keep(key string, req fence.AcquireRequest) func(context.Context, *run) (any, error) {
	return func(ctx context.Context, r *run) (any, error) {
		g, err := r.svc.Acquire(ctx, req)
		if err == nil {
			r.tokens[key] = g.Lease.Token
		}
		return g, err
	}
}

func (r *run) ref(seq, ack uint64) fence.SessionRef {
	return fence.SessionRef{ID: r.session, Seq: seq, Ack: ack}
}

// table is the conformance table. Tokens are deterministic on a fresh
// store, so the expectations name them.
var table = []step{
	{"acquire", keep("a", fence.AcquireRequest{Name: "a", Owner: "o1", TTL: 10 * time.Second, RequestID: "r1"}), []string{"Token:1 ", "Replayed:false"}},
	{"acquire held: busy", acquire(fence.AcquireRequest{Name: "a", Owner: "o2", TTL: 10 * time.Second}),
		[]string{"BUSY", "Holder:o1", "Token:1 "}},
	{"acquire retried by request_id", acquire(fence.AcquireRequest{Name: "a", Owner: "o1", TTL: 10 * time.Second, RequestID: "r1"}),
		[]string{"Token:1 ", "Replayed:true"}},
	{"renew", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Renew(ctx, fence.RenewRequest{Name: "a", Token: r.tokens["a"], TTL: 20 * time.Second})
	}, []string{"TTL:20s"}},
	{"renew by a token never issued", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Renew(ctx, fence.RenewRequest{Name: "a", Token: 77})
	}, []string{"UNKNOWN_TOKEN"}},
	{"get", func(ctx context.Context, r *run) (any, error) { return r.svc.Get(ctx, "a") }, []string{"Owner:o1", "LastToken:1"}},
	{"get a lock never taken", func(ctx context.Context, r *run) (any, error) { return r.svc.Get(ctx, "nobody") }, []string{"Lease:<nil>", "LastToken:0"}},
	{"acquire b", keep("b", fence.AcquireRequest{Name: "b", Owner: "o1", TTL: 10 * time.Second}), []string{"Token:2 "}},
	{"write", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Write(ctx, fence.WriteRequest{Resource: "res", Token: r.tokens["b"], Value: []byte("x"), OpID: "w1"})
	}, []string{"Version:1", "LastToken:2", "Replayed:false"}},
	{"write retried by op_id", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Write(ctx, fence.WriteRequest{Resource: "res", Token: r.tokens["b"], Value: []byte("x"), OpID: "w1"})
	}, []string{"Version:1", "Replayed:true"}},
	{"op_id reused with another value", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Write(ctx, fence.WriteRequest{Resource: "res", Token: r.tokens["b"], Value: []byte("y"), OpID: "w1"})
	}, []string{"OP_CONFLICT"}},
	{"release", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Release(ctx, fence.ReleaseRequest{Name: "a", Token: r.tokens["a"]})
	}, []string{"Replayed:false"}},
	{"release again", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Release(ctx, fence.ReleaseRequest{Name: "a", Token: r.tokens["a"]})
	}, []string{"error"}},
	{"acquire a again", keep("a2", fence.AcquireRequest{Name: "a", Owner: "o3", TTL: 10 * time.Second}), []string{"Token:3 "}},
	{"write by the newer token", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Write(ctx, fence.WriteRequest{Resource: "res", Token: r.tokens["a2"], Value: []byte("5"), OpID: "w2"})
	}, []string{"Version:2", "LastToken:3"}},
	{"write by an older token: stale", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Write(ctx, fence.WriteRequest{Resource: "res", Token: r.tokens["b"], Value: []byte("z")})
	}, []string{"STALE_TOKEN", "LastAccepted:3}"}},
	{"add", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Add(ctx, fence.AddRequest{Resource: "res", Token: r.tokens["a2"], Delta: 2, OpID: "a1"})
	}, []string{"Value:7", "Version:3"}},
	{"add to a value that is not a number", func(ctx context.Context, r *run) (any, error) {
		if _, err := r.svc.Write(ctx, fence.WriteRequest{Resource: "text", Token: r.tokens["a2"], Value: []byte("nan")}); err != nil {
			return nil, err
		}
		return r.svc.Add(ctx, fence.AddRequest{Resource: "text", Token: r.tokens["a2"], Delta: 1})
	}, []string{"INVALID_ARGUMENT", "Field:value"}},
	{"delete", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Delete(ctx, fence.DeleteRequest{Resource: "res", Token: r.tokens["a2"], OpID: "d1"})
	}, []string{"Deleted:true", "Version:4"}},
	{"read", func(ctx context.Context, r *run) (any, error) { return r.svc.Read(ctx, "res") }, []string{"Deleted:true", "LastToken:3", "Value:[]"}},
	{"read a resource never written", func(ctx context.Context, r *run) (any, error) { return r.svc.Read(ctx, "none") }, []string{"Version:0"}},
	{"list, first page", func(ctx context.Context, r *run) (any, error) { return r.svc.List(ctx, fence.ListRequest{Limit: 1}) },
		[]string{"Name:a ", "Next:a"}},
	{"list, next page", func(ctx context.Context, r *run) (any, error) {
		return r.svc.List(ctx, fence.ListRequest{After: "a", Limit: 1})
	}, []string{"Name:b "}},
	{"list by prefix", func(ctx context.Context, r *run) (any, error) {
		return r.svc.List(ctx, fence.ListRequest{Prefix: "b", Limit: 10})
	}, []string{"Name:b ", "Next:}"}},

	// Bad fields: refused naming the field, nothing changed.
	{"empty name", acquire(fence.AcquireRequest{Owner: "o", TTL: 10 * time.Second}), []string{"INVALID_ARGUMENT", "Field:name"}},
	{"ttl absent on an acquire without a session", acquire(fence.AcquireRequest{Name: "c"}), []string{"INVALID_ARGUMENT", "Field:ttl"}},
	{"empty name and no ttl: the name is judged first", acquire(fence.AcquireRequest{Owner: "o"}), []string{"INVALID_ARGUMENT", "Field:name "}},
	{"seq without a session and no ttl: the session is judged first", acquire(fence.AcquireRequest{Name: "c", Session: fence.SessionRef{Seq: 1}}),
		[]string{"INVALID_ARGUMENT", "Field:session.id "}},
	{"ttl below the least", acquire(fence.AcquireRequest{Name: "c", TTL: time.Millisecond}), []string{"INVALID_ARGUMENT", "Field:ttl"}},
	{"ttl above the largest", acquire(fence.AcquireRequest{Name: "c", TTL: fence.DefaultMaxTTL + time.Second}), []string{"INVALID_ARGUMENT", "Field:ttl"}},
	{"lock_delay above the largest", acquire(fence.AcquireRequest{Name: "c", TTL: 10 * time.Second, LockDelay: fence.MaxLockDelay + time.Second}),
		[]string{"INVALID_ARGUMENT", "Field:lock_delay"}},
	{"lock_delay above the default rule (--max-lock-delay 1m)", acquire(fence.AcquireRequest{Name: "c", TTL: 10 * time.Second, LockDelay: fence.DefaultMaxLockDelay + time.Second}),
		[]string{"INVALID_ARGUMENT", "Field:lock_delay", "max_lock_delay"}},
	{"owner too long", acquire(fence.AcquireRequest{Name: "c", Owner: strings.Repeat("o", fence.MaxOwnerBytes+1), TTL: 10 * time.Second}),
		[]string{"INVALID_ARGUMENT", "Field:owner"}},
	{"request_id too long", acquire(fence.AcquireRequest{Name: "c", TTL: 10 * time.Second, RequestID: strings.Repeat("r", fence.MaxIDBytes+1)}),
		[]string{"INVALID_ARGUMENT", "Field:request_id"}},
	{"name and locks both", acquire(fence.AcquireRequest{Name: "c", Locks: []fence.LockSpec{{Name: "d"}, {Name: "e"}}, TTL: 10 * time.Second}),
		[]string{"INVALID_ARGUMENT", "Field:name "}},
	{"a set naming a lock twice", acquire(fence.AcquireRequest{Locks: []fence.LockSpec{{Name: "d"}, {Name: "e"}, {Name: "d"}}, TTL: 10 * time.Second}),
		[]string{"INVALID_ARGUMENT", "Field:locks[2].name "}},
	{"a set of too many locks", acquire(fence.AcquireRequest{Locks: manyLocks(fence.MaxSetLocks + 1), TTL: 10 * time.Second}),
		[]string{"INVALID_ARGUMENT", "Field:locks ", "at most 64 locks"}},
	{"a set with an empty name", acquire(fence.AcquireRequest{Locks: []fence.LockSpec{{Name: "d"}, {}}, TTL: 10 * time.Second}),
		[]string{"INVALID_ARGUMENT", "Field:locks[1].name "}},
	{"a set's lock with too many permits", acquire(fence.AcquireRequest{Locks: []fence.LockSpec{{Name: "d"}, {Name: "e", Permits: fence.MaxPermits + 1}}, TTL: 10 * time.Second}),
		[]string{"INVALID_ARGUMENT", "Field:locks[1].permits ", "at most 1024"}},
	{"a set's lock shared with permits", acquire(fence.AcquireRequest{Locks: []fence.LockSpec{{Name: "d", Mode: fence.Shared, Permits: 2}, {Name: "e"}}, TTL: 10 * time.Second}),
		[]string{"INVALID_ARGUMENT", "Field:locks[0].mode "}},
	{"a set with a mode of its own", acquire(fence.AcquireRequest{Locks: []fence.LockSpec{{Name: "d"}, {Name: "e"}}, Mode: fence.Shared, TTL: 10 * time.Second}),
		[]string{"INVALID_ARGUMENT", "Field:mode "}},
	{"a set with permits of its own", acquire(fence.AcquireRequest{Locks: []fence.LockSpec{{Name: "d"}, {Name: "e"}}, Permits: 2, TTL: 10 * time.Second}),
		[]string{"INVALID_ARGUMENT", "Field:permits "}},
	{"too many permits", acquire(fence.AcquireRequest{Name: "c", Permits: fence.MaxPermits + 1, TTL: 10 * time.Second}),
		[]string{"INVALID_ARGUMENT", "Field:permits ", "at most 1024"}},
	{"shared with permits", acquire(fence.AcquireRequest{Name: "c", Mode: fence.Shared, Permits: 2, TTL: 10 * time.Second}),
		[]string{"INVALID_ARGUMENT", "Field:mode "}},
	{"too many permits and no owner bound: permits is judged before owner", acquire(fence.AcquireRequest{Name: "c", Permits: fence.MaxPermits + 1, Owner: strings.Repeat("o", fence.MaxOwnerBytes+1), TTL: 10 * time.Second}),
		[]string{"INVALID_ARGUMENT", "Field:permits "}},
	{"value too large", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Write(ctx, fence.WriteRequest{Resource: "res", Token: r.tokens["a2"], Value: make([]byte, fence.MaxValueBytes+1)})
	}, []string{"INVALID_ARGUMENT", "Field:value"}},
	{"list with no limit", func(ctx context.Context, r *run) (any, error) { return r.svc.List(ctx, fence.ListRequest{}) },
		[]string{"INVALID_ARGUMENT", "Field:limit "}},
	{"get: bad name", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Get(ctx, strings.Repeat("n", fence.MaxNameBytes+1))
	},
		[]string{"INVALID_ARGUMENT", "Field:name"}},
	{"nothing changed", func(ctx context.Context, r *run) (any, error) { return r.svc.Get(ctx, "c") }, []string{"LastToken:0"}},

	// Waits.
	{"a wait that runs out", acquire(fence.AcquireRequest{Name: "a", Owner: "o4", TTL: 10 * time.Second, Wait: 200 * time.Millisecond, RequestID: "wait1"}),
		[]string{"BUSY", "Waited:true", "Holder:o3"}},
	{"a wait whose caller goes", func(ctx context.Context, r *run) (any, error) {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			defer cancel()
			waitFor(wctx, r, "a", func(li fence.LockInfo) bool { return li.Waiters == 1 })
		}()
		return r.svc.Acquire(wctx, fence.AcquireRequest{Name: "a", Owner: "o5", TTL: 10 * time.Second, Wait: time.Hour, RequestID: "wait2"})
	}, []string{"unavailable"}},
	{"its wait is withdrawn", func(ctx context.Context, r *run) (any, error) {
		return waitFor(ctx, r, "a", func(li fence.LockInfo) bool { return li.Waiters == 0 })
	}, []string{"Waiters:0", "Owner:o3"}},

	// Sessions and seqs.
	{"open a session", func(ctx context.Context, r *run) (any, error) {
		g, err := r.svc.OpenSession(ctx, fence.OpenSessionRequest{TTL: 10 * time.Second, RequestID: "s1"})
		r.session = g.Session.ID
		return g, err
	}, []string{"ID:1 ", "TTL:10s", "Replayed:false"}},
	{"open without a ttl", func(ctx context.Context, r *run) (any, error) {
		return r.svc.OpenSession(ctx, fence.OpenSessionRequest{})
	}, []string{"INVALID_ARGUMENT", "Field:ttl"}},
	{"open retried by request_id", func(ctx context.Context, r *run) (any, error) {
		return r.svc.OpenSession(ctx, fence.OpenSessionRequest{TTL: 10 * time.Second, RequestID: "s1"})
	}, []string{"ID:1 ", "Replayed:true"}},
	{"keepalive", func(ctx context.Context, r *run) (any, error) {
		return r.svc.KeepAlive(ctx, fence.KeepAliveRequest{ID: r.session, TTL: 15 * time.Second})
	}, []string{"ID:1 ", "TTL:15s"}},
	{"session acquire, seq 1", func(ctx context.Context, r *run) (any, error) {
		g, err := r.svc.Acquire(ctx, fence.AcquireRequest{Name: "s", Owner: "so", Session: r.ref(1, 0)})
		r.tokens["s"] = g.Lease.Token
		return g, err
	}, []string{"Token:4 ", "Replayed:false"}},
	{"session acquire with a ttl", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Acquire(ctx, fence.AcquireRequest{Name: "s3", Owner: "so", TTL: time.Minute, Session: r.ref(0, 0)})
	}, []string{"INVALID_ARGUMENT", "Field:ttl"}},
	{"session renew with a ttl", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Renew(ctx, fence.RenewRequest{Name: "s", Token: r.tokens["s"], TTL: time.Minute, Session: r.ref(0, 0)})
	}, []string{"INVALID_ARGUMENT", "Field:ttl"}},
	{"seq 1 again: the saved grant", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Acquire(ctx, fence.AcquireRequest{Name: "s", Owner: "so", Session: r.ref(1, 0)})
	}, []string{"Token:4 ", "Replayed:true"}},
	{"session renew, seq 2", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Renew(ctx, fence.RenewRequest{Name: "s", Token: r.tokens["s"], Session: r.ref(2, 2)})
	}, []string{"Token:4 ", "Replayed:false", "Session:{ID:1 TTL:15s Remaining:0s Leases:1}"}},
	{"seq below the acknowledged floor", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Renew(ctx, fence.RenewRequest{Name: "s", Token: r.tokens["s"], Session: r.ref(1, 1)})
	}, []string{"INVALID_ARGUMENT", "Field:seq"}},
	{"ack past seq", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Renew(ctx, fence.RenewRequest{Name: "s", Token: r.tokens["s"], Session: r.ref(3, 4)})
	}, []string{"INVALID_ARGUMENT", "ack"}},
	{"seq without a session", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Renew(ctx, fence.RenewRequest{Name: "s", Token: r.tokens["s"], Session: fence.SessionRef{Seq: 3}})
	}, []string{"INVALID_ARGUMENT", "session"}},
	{"session write, seq 3", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Write(ctx, fence.WriteRequest{Resource: "sres", Token: r.tokens["s"], Value: []byte("v"), Session: r.ref(3, 3)})
	}, []string{"Version:1", "Replayed:false"}},
	{"seq 3 again", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Write(ctx, fence.WriteRequest{Resource: "sres", Token: r.tokens["s"], Value: []byte("v"), Session: r.ref(3, 3)})
	}, []string{"Version:1", "Replayed:true"}},
	{"keepalive with seq 4", func(ctx context.Context, r *run) (any, error) {
		return r.svc.KeepAlive(ctx, fence.KeepAliveRequest{ID: r.session, Session: r.ref(4, 4)})
	}, []string{"ID:1 ", "Leases:1}", "Replayed:false"}},
	{"seq 4 again", func(ctx context.Context, r *run) (any, error) {
		return r.svc.KeepAlive(ctx, fence.KeepAliveRequest{ID: r.session, Session: r.ref(4, 4)})
	}, []string{"ID:1 ", "Replayed:true"}},
	{"keepalive without a session", func(ctx context.Context, r *run) (any, error) {
		return r.svc.KeepAlive(ctx, fence.KeepAliveRequest{})
	}, []string{"INVALID_ARGUMENT", "Field:session "}},
	{"close without a session", func(ctx context.Context, r *run) (any, error) {
		return r.svc.CloseSession(ctx, fence.CloseSessionRequest{})
	}, []string{"INVALID_ARGUMENT", "Field:session "}},
	{"keepalive naming two sessions", func(ctx context.Context, r *run) (any, error) {
		return r.svc.KeepAlive(ctx, fence.KeepAliveRequest{ID: r.session, Session: fence.SessionRef{ID: r.session + 1, Seq: 9}})
	}, []string{"INVALID_ARGUMENT", "Field:session_ref.id"}},
	{"keepalive with ack past seq", func(ctx context.Context, r *run) (any, error) {
		return r.svc.KeepAlive(ctx, fence.KeepAliveRequest{ID: r.session, Session: r.ref(9, 10)})
	}, []string{"INVALID_ARGUMENT", "Field:session_ref.ack"}},
	{"session release, seq 5", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Release(ctx, fence.ReleaseRequest{Name: "s", Token: r.tokens["s"], Session: r.ref(5, 5)})
	}, []string{"Replayed:false"}},
	{"seq 5 again", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Release(ctx, fence.ReleaseRequest{Name: "s", Token: r.tokens["s"], Session: r.ref(5, 5)})
	}, []string{"Replayed:true"}},
	{"session renew of a released lease, seq 6: refused", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Renew(ctx, fence.RenewRequest{Name: "s", Token: r.tokens["s"], Session: r.ref(6, 6)})
	}, []string{"error", "Replayed:false"}},
	{"seq 6 again: the saved refusal, replayed", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Renew(ctx, fence.RenewRequest{Name: "s", Token: r.tokens["s"], Session: r.ref(6, 6)})
	}, []string{"error", "Replayed:true"}},
	{"close the session", func(ctx context.Context, r *run) (any, error) {
		return r.svc.CloseSession(ctx, fence.CloseSessionRequest{ID: r.session})
	}, []string{"Replayed:false"}},
	{"keepalive of a closed session", func(ctx context.Context, r *run) (any, error) {
		return r.svc.KeepAlive(ctx, fence.KeepAliveRequest{ID: r.session})
	}, []string{"SESSION_EXPIRED"}},
	{"session acquire on a closed session", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Acquire(ctx, fence.AcquireRequest{Name: "s2", Session: r.ref(7, 7)})
	}, []string{"SESSION_EXPIRED"}},

	// The endpoint gone: unavailable (outcome unknown), never a refusal.
	{"stop; get", func(ctx context.Context, r *run) (any, error) {
		r.stop()
		return r.svc.Get(ctx, "a")
	}, []string{"unavailable"}},
	{"acquire after stop", acquire(fence.AcquireRequest{Name: "z", TTL: 10 * time.Second}), []string{"unavailable"}},
	{"write after stop", func(ctx context.Context, r *run) (any, error) {
		return r.svc.Write(ctx, fence.WriteRequest{Resource: "res", Token: 3, Value: []byte("q")})
	}, []string{"unavailable"}},
}

// waitFor polls lock name until ok holds (or ctx ends) and returns what it
// saw last.
func waitFor(ctx context.Context, r *run, name string, ok func(fence.LockInfo) bool) (fence.LockInfo, error) {
	for {
		li, err := r.svc.Get(ctx, name)
		if err != nil || ok(li) {
			return li, err
		}
		select {
		case <-ctx.Done():
			return li, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Run runs the table against the Service of open and checks each answer;
// it returns the outcomes, for Compare.
func Run(t *testing.T, target Target) []Outcome {
	t.Helper()
	return runSteps(t, target, table)
}

// RunBoundaries runs the lock-boundary table (boundaries.go) against
// target, as Run runs the conformance table.
func RunBoundaries(t *testing.T, target Target) []Outcome {
	t.Helper()
	return runSteps(t, target, boundaryTable)
}

func runSteps(t *testing.T, target Target, steps []step) []Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := &run{svc: target.Service, stop: target.Stop, tokens: map[string]fence.Token{}}
	out := make([]Outcome, 0, len(steps))
	for _, s := range steps {
		v, err := s.do(ctx, r)
		o := outcome(s.name, v, err)
		out = append(out, o)
		for _, w := range s.want {
			if !strings.Contains(o.Value+o.Err, w) && !(w == "error" && o.Err != "") {
				t.Errorf("%s\n\twant it to contain %q", o, w)
			}
		}
	}
	return out
}

// Compare fails t for every call that a and b answered differently.
func Compare(t *testing.T, aName string, a []Outcome, bName string, b []Outcome) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s made %d calls, %s %d", aName, len(a), bName, len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Errorf("answers differ:\n\t%s: %s\n\t%s: %s", aName, a[i], bName, b[i])
		}
	}
}

// outcome normalizes a call's answer: what depends on time (Remaining,
// LockDelayRemaining) is checked for range and dropped; pointers are
// followed, so every other field of the value is compared. An error's
// outcome is its reason and facts and the Replayed of the value returned
// with it (a saved refusal answered again).
func outcome(step string, v any, err error) Outcome {
	if err != nil {
		return Outcome{Step: step, Err: fmt.Sprintf("%s Replayed:%v", errText(err), replayed(v))}
	}
	switch x := v.(type) {
	case fence.Grant:
		var sess any = "<nil>"
		if x.Session != nil {
			sess = session(*x.Session)
		}
		v = struct {
			Lease    fence.Lease
			Replayed bool
			Session  any
		}{lease(x.Lease), x.Replayed, sess}
	case fence.LockInfo:
		v = lockInfo(x)
	case fence.LockPage:
		locks := make([]lockText, 0, len(x.Locks))
		for _, li := range x.Locks {
			locks = append(locks, lockInfo(li))
		}
		v = struct {
			Locks []lockText
			Next  string
		}{locks, x.Next}
	case fence.SessionGrant:
		x.Session = session(x.Session)
		v = x
	case fence.Written:
		v = x
	}
	return Outcome{Step: step, Value: fmt.Sprintf("%+v", v)}
}

func lease(l fence.Lease) fence.Lease {
	if l.Remaining <= 0 || (l.TTL > 0 && l.Remaining > l.TTL) {
		l.Remaining = -1 // out of range: shows in the outcome
	} else {
		l.Remaining = 0
	}
	// The proof differs from one cluster to another (its id and keys are
	// its own): compared is that the lease carries one, for its token
	// (printed as "<token>.signed.key.c2ln", or the bare token).
	l.Signed = proofShape(l.Signed)
	if l.Proofs != nil {
		proofs := make([]fence.SignedToken, len(l.Proofs))
		for i, p := range l.Proofs {
			proofs[i] = proofShape(p)
		}
		l.Proofs = proofs
	}
	return l
}

// proofShape is p with what is a cluster's own replaced: a proof of p's
// token, or none.
func proofShape(p fence.SignedToken) fence.SignedToken {
	if !p.Signed() {
		return fence.SignedToken{Token: p.Token}
	}
	return fence.SignedToken{Token: p.Token, ClusterID: "signed", KeyID: "key", Signature: []byte("sig")}
}

// lockText is a fence.LockInfo made printable: its lease by value (nil:
// free), lock-delay as running or not.
type lockText struct {
	Name      string
	Lease     any
	Holders   []fence.Lease
	Permits   uint32
	Waiters   int
	Delayed   bool
	LastToken fence.Token
}

func lockInfo(li fence.LockInfo) lockText {
	t := lockText{Name: li.Name, Lease: "<nil>", Permits: li.Permits, Waiters: li.Waiters, Delayed: li.LockDelayRemaining > 0, LastToken: li.LastToken}
	if li.Lease != nil {
		t.Lease = lease(*li.Lease)
	}
	for _, h := range li.Holders {
		t.Holders = append(t.Holders, lease(h))
	}
	return t
}

func session(si fence.SessionInfo) fence.SessionInfo {
	if si.Remaining <= 0 || si.Remaining > si.TTL {
		si.Remaining = -1
	} else {
		si.Remaining = 0
	}
	return si
}

// replayed is the Replayed field of a Service method's value.
func replayed(v any) bool {
	switch x := v.(type) {
	case fence.Grant:
		return x.Replayed
	case fence.Released:
		return x.Replayed
	case fence.Written:
		return x.Replayed
	case fence.SessionGrant:
		return x.Replayed
	}
	return false
}

// errText is an error as the table compares it: a refusal as its reason
// and typed facts (time dropped), anything matching fence.ErrUnavailable
// as "unavailable", anything else (a failure of the table) as its message.
func errText(err error) string {
	if reason := fence.ReasonOf(err); reason != "" {
		return fmt.Sprintf("%s %+v", reason, typed(err))
	}
	if errors.Is(err, fence.ErrUnavailable) {
		return "unavailable"
	}
	return "not a refusal nor unavailable: " + err.Error()
}

// typed is the typed refusal in err, by value (time dropped), or err
// when it has none.
func typed(err error) any {
	var (
		busy    *fence.BusyError
		stale   *fence.StaleTokenError
		holder  *fence.NotHolderError
		expired *fence.LeaseExpiredError
		unknown *fence.UnknownTokenError
		op      *fence.OpConflictError
		inv     *fence.InvalidError
		limit   *fence.ResourceExhaustedError
		sess    *fence.SessionExpiredError
		permits *fence.PermitsMismatchError
	)
	switch {
	case errors.As(err, &busy):
		b := *busy
		b.Remaining = 0
		return b
	case errors.As(err, &stale):
		return *stale
	case errors.As(err, &holder):
		return *holder
	case errors.As(err, &expired):
		return *expired
	case errors.As(err, &unknown):
		return *unknown
	case errors.As(err, &op):
		return *op
	case errors.As(err, &inv):
		return *inv
	case errors.As(err, &limit):
		return *limit
	case errors.As(err, &sess):
		return *sess
	case errors.As(err, &permits):
		return *permits
	}
	return err
}
