package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/state"
)

// fieldCase sends a request with one field set, over the protocol of c,
// and fails unless the field's effect is seen. n is a name of its own.
type fieldCase struct {
	field string
	run   func(t *testing.T, c clients, s fencev1connect.SessionServiceClient, n string)
}

// Each request field that crosses the server's converters (ops.go: wire
// request to fence request) has an effect the reply or a later request
// shows, over Connect JSON and gRPC; a field dropped on the way (left at
// its zero value) loses it. (lock_delay: TestLockDelayReachesTheStore.)
func TestRequestFieldsReachTheStore(t *testing.T) {
	_, url := startServer(t)
	ctx := context.Background()
	acquire := func(t *testing.T, c clients, req *fencev1.AcquireRequest) *fencev1.AcquireResponse {
		t.Helper()
		r, err := c.locks.Acquire(ctx, connect.NewRequest(req))
		if err != nil {
			t.Fatalf("acquire %v: %v", req, err)
		}
		return r.Msg
	}
	hour := durationpb.New(time.Hour)
	cases := []fieldCase{
		{"acquire owner", func(t *testing.T, c clients, _ fencev1connect.SessionServiceClient, n string) {
			if l := acquire(t, c, &fencev1.AcquireRequest{Name: n, Owner: "owner-A", Ttl: hour}).GetLease(); l.GetOwner() != "owner-A" {
				t.Fatalf("lease %v, want owner owner-A", l)
			}
			if li := lockOf(t, url, n); li.GetLease().GetOwner() != "owner-A" {
				t.Fatalf("Get = %v, want held by owner-A", li)
			}
		}},
		{"acquire ttl", func(t *testing.T, c clients, _ fencev1connect.SessionServiceClient, n string) {
			if l := acquire(t, c, &fencev1.AcquireRequest{Name: n, Ttl: durationpb.New(2 * time.Hour)}).GetLease(); l.GetTtl().AsDuration() != 2*time.Hour {
				t.Fatalf("lease %v, want ttl 2h", l)
			}
		}},
		{"acquire wait", func(t *testing.T, c clients, _ fencev1connect.SessionServiceClient, n string) {
			held := acquire(t, c, &fencev1.AcquireRequest{Name: n, Owner: "A", Ttl: hour}).GetLease()
			type result struct {
				l   *fencev1.Lease
				err error
			}
			done := make(chan result, 1)
			go func() {
				r, err := c.locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: n, Owner: "B", Ttl: hour, Wait: hour}))
				if err != nil {
					done <- result{nil, err}
					return
				}
				done <- result{r.Msg.GetLease(), nil}
			}()
			until(t, "B's acquire queues (or ends)", func() bool { return lockOf(t, url, n).GetWaiters() == 1 || len(done) > 0 })
			if len(done) > 0 {
				r := <-done
				t.Fatalf("acquire with wait on a held lock ended at once: %v, %v; want it queued", r.l, r.err)
			}
			if _, err := c.locks.Release(ctx, connect.NewRequest(&fencev1.ReleaseRequest{Name: n, Token: held.GetToken()})); err != nil {
				t.Fatal(err)
			}
			if r := <-done; r.err != nil || r.l.GetOwner() != "B" {
				t.Fatalf("waiting acquire after the release = %v, %v; want granted to B", r.l, r.err)
			}
		}},
		{"acquire request_id", func(t *testing.T, c clients, _ fencev1connect.SessionServiceClient, n string) {
			req := &fencev1.AcquireRequest{Name: n, Ttl: hour, RequestId: "rid-" + n}
			first, again := acquire(t, c, req), acquire(t, c, req)
			if first.GetReplayed() || !again.GetReplayed() || again.GetLease().GetToken() != first.GetLease().GetToken() {
				t.Fatalf("acquire, then its retry with the same request_id = %v, %v; want the same lease, the retry replayed", first, again)
			}
		}},
		{"acquire session.seq", func(t *testing.T, c clients, sc fencev1connect.SessionServiceClient, n string) {
			id := openSession(t, sc, time.Hour)
			req := &fencev1.AcquireRequest{Name: n, Session: &fencev1.SessionRef{Id: id, Seq: 1, Ack: 1}}
			first, again := acquire(t, c, req), acquire(t, c, req)
			if first.GetReplayed() || !again.GetReplayed() || again.GetLease().GetToken() != first.GetLease().GetToken() {
				t.Fatalf("session acquire, then its retry with the same seq = %v, %v; want the same lease, the retry replayed", first, again)
			}
		}},
		{"session.ack", func(t *testing.T, c clients, sc fencev1connect.SessionServiceClient, n string) {
			id := openSession(t, sc, time.Hour)
			tok := acquire(t, c, &fencev1.AcquireRequest{Name: n, Session: &fencev1.SessionRef{Id: id, Seq: 1, Ack: 1}}).GetLease().GetToken()
			add := func(seq, ack uint64) error {
				_, err := c.res.Add(ctx, connect.NewRequest(&fencev1.AddRequest{Resource: n, Token: tok, Delta: 1, Session: &fencev1.SessionRef{Id: id, Seq: seq, Ack: ack}}))
				return err
			}
			if err := add(2, 2); err != nil {
				t.Fatal(err)
			}
			if err := add(3, 3); err != nil { // acknowledges seq 2
				t.Fatal(err)
			}
			// seq 2 is below the acknowledged floor now: refused, not replayed.
			checkInvalid(t, add(2, 2), "seq")
		}},
		{"renew ttl", func(t *testing.T, c clients, _ fencev1connect.SessionServiceClient, n string) {
			tok := acquire(t, c, &fencev1.AcquireRequest{Name: n, Ttl: hour}).GetLease().GetToken()
			r, err := c.locks.Renew(ctx, connect.NewRequest(&fencev1.RenewRequest{Name: n, Token: tok, Ttl: durationpb.New(3 * time.Hour)}))
			if err != nil {
				t.Fatal(err)
			}
			if r.Msg.GetLease().GetTtl().AsDuration() != 3*time.Hour {
				t.Fatalf("renew with ttl 3h = %v, want the lease's ttl 3h", r.Msg)
			}
		}},
		{"add delta and op_id", func(t *testing.T, c clients, _ fencev1connect.SessionServiceClient, n string) {
			tok := acquire(t, c, &fencev1.AcquireRequest{Name: n, Ttl: hour}).GetLease().GetToken()
			req := &fencev1.AddRequest{Resource: n, Token: tok, Delta: 7, OpId: "op-" + n}
			for i, want := range []bool{false, true} {
				r, err := c.res.Add(ctx, connect.NewRequest(req))
				if err != nil {
					t.Fatal(err)
				}
				if r.Msg.GetValue() != 7 || r.Msg.GetReplayed() != want || r.Msg.GetState().GetVersion() != 1 {
					t.Fatalf("add #%d of 7 with op_id %q = %v; want 7 at version 1, replayed %t", i+1, req.OpId, r.Msg, want)
				}
			}
		}},
		{"delete op_id", func(t *testing.T, c clients, _ fencev1connect.SessionServiceClient, n string) {
			tok := acquire(t, c, &fencev1.AcquireRequest{Name: n, Ttl: hour}).GetLease().GetToken()
			if _, err := c.res.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: n, Token: tok, Value: []byte("v")})); err != nil {
				t.Fatal(err)
			}
			req := &fencev1.DeleteRequest{Resource: n, Token: tok, OpId: "del-" + n}
			for i, want := range []bool{false, true} {
				r, err := c.res.Delete(ctx, connect.NewRequest(req))
				if err != nil {
					t.Fatal(err)
				}
				if r.Msg.GetReplayed() != want || r.Msg.GetState().GetVersion() != 2 {
					t.Fatalf("delete #%d with op_id %q = %v; want version 2, replayed %t", i+1, req.OpId, r.Msg, want)
				}
			}
		}},
		{"open request_id", func(t *testing.T, _ clients, sc fencev1connect.SessionServiceClient, n string) {
			req := &fencev1.OpenSessionRequest{Ttl: hour, RequestId: "open-" + n}
			first, err := sc.Open(ctx, connect.NewRequest(req))
			if err != nil {
				t.Fatal(err)
			}
			again, err := sc.Open(ctx, connect.NewRequest(req))
			if err != nil {
				t.Fatal(err)
			}
			if !again.Msg.GetReplayed() || again.Msg.GetSession().GetId() != first.Msg.GetSession().GetId() {
				t.Fatalf("open, then its retry with the same request_id = %v; want session %d again, replayed", again.Msg, first.Msg.GetSession().GetId())
			}
		}},
		{"keepalive ttl", func(t *testing.T, _ clients, sc fencev1connect.SessionServiceClient, n string) {
			id := openSession(t, sc, time.Hour)
			r, err := sc.KeepAlive(ctx, connect.NewRequest(&fencev1.KeepAliveRequest{Session: id, Ttl: durationpb.New(2 * time.Hour)}))
			if err != nil {
				t.Fatal(err)
			}
			if r.Msg.GetSession().GetTtl().AsDuration() != 2*time.Hour {
				t.Fatalf("keepalive with ttl 2h = %v, want the session's ttl 2h", r.Msg)
			}
		}},
		{"keepalive session_ref.seq", func(t *testing.T, _ clients, sc fencev1connect.SessionServiceClient, n string) {
			id := openSession(t, sc, time.Hour)
			req := &fencev1.KeepAliveRequest{Session: id, SessionRef: &fencev1.SessionRef{Seq: 1, Ack: 1}}
			for i, want := range []bool{false, true} {
				r, err := sc.KeepAlive(ctx, connect.NewRequest(req))
				if err != nil {
					t.Fatal(err)
				}
				if r.Msg.GetReplayed() != want {
					t.Fatalf("keepalive #%d with session_ref.seq 1 = %v, want replayed %t", i+1, r.Msg, want)
				}
			}
		}},
		{"list prefix, page_size, page_token", func(t *testing.T, c clients, _ fencev1connect.SessionServiceClient, n string) {
			for _, k := range []string{"/a", "/b", "/c"} {
				acquire(t, c, &fencev1.AcquireRequest{Name: n + k, Ttl: hour})
			}
			acquire(t, c, &fencev1.AcquireRequest{Name: n + "-other", Ttl: hour})
			var got []string
			tok := ""
			for page := 0; ; page++ {
				l, err := c.locks.List(ctx, connect.NewRequest(&fencev1.ListRequest{Prefix: n + "/", PageSize: 2, PageToken: tok}))
				if err != nil {
					t.Fatal(err)
				}
				if len(l.Msg.GetLocks()) > 2 || page >= 2 {
					t.Fatalf("List page %d = %v; want at most 2 locks a page, 2 pages", page+1, l.Msg)
				}
				for _, li := range l.Msg.GetLocks() {
					got = append(got, strings.TrimPrefix(li.GetName(), n))
				}
				if tok = l.Msg.GetNextPageToken(); tok == "" {
					break
				}
			}
			if strings.Join(got, " ") != "/a /b /c" {
				t.Fatalf("listed %v under %s/, want /a /b /c", got, n)
			}
		}},
	}
	sc := sessionClients(url)
	for i, c := range protocols(url) {
		for _, tc := range cases {
			t.Run(c.name+"/"+tc.field, func(t *testing.T) {
				tc.run(t, c, sc[i%len(sc)].c, "f-"+c.name+"-"+strings.NewReplacer(" ", "-", ",", "").Replace(tc.field))
			})
		}
	}
}

// Each refusal's facts reach the client, over Connect JSON and gRPC: the
// raw ErrorDetail the server sent is compared field by field with what the
// refusal must say, and the typed error a client rebuilds from it
// (apierr.FromConnect) must say the same, so a fact lost on either side of
// the wire is seen.
func TestRefusalFactsReachTheClient(t *testing.T) {
	rules := state.DefaultConfig()
	rules.MaxWaitersPerLock = 1
	s, url := startServerRules(t, rules)
	ctx := context.Background()
	hour := durationpb.New(time.Hour)
	sc := sessionClients(url)[0].c
	for _, c := range protocols(url) {
		t.Run(c.name, func(t *testing.T) {
			p := "facts-" + c.name + "-"
			acquire := func(name, owner string, ttl time.Duration, wait time.Duration) (*fencev1.Lease, error) {
				req := &fencev1.AcquireRequest{Name: name, Owner: owner, Ttl: durationpb.New(ttl)}
				if wait > 0 {
					req.Wait = durationpb.New(wait)
				}
				r, err := c.locks.Acquire(ctx, connect.NewRequest(req))
				if err != nil {
					return nil, err
				}
				return r.Msg.GetLease(), nil
			}
			must := func(l *fencev1.Lease, err error) uint64 {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
				return l.GetToken()
			}
			// want checks err's raw detail is want; a BUSY's remaining is
			// checked to be in (0, 1h] and then left out.
			want := func(what string, err error, code connect.Code, want *fencev1.ErrorDetail) {
				t.Helper()
				var ce *connect.Error
				if !errors.As(err, &ce) || ce.Code() != code {
					t.Fatalf("%s = %v, want %v with %v", what, err, code, want)
				}
				var got *fencev1.ErrorDetail
				for _, d := range ce.Details() {
					if v, err := d.Value(); err == nil {
						if ed, ok := v.(*fencev1.ErrorDetail); ok {
							got = ed
						}
					}
				}
				// What a client rebuilds from it (apierr.FromConnect, as the
				// Go client does) says the same.
				if back := apierr.Detail(apierr.FromConnect(err)); !proto.Equal(back, got) {
					t.Fatalf("%s: the client rebuilds\n  %v\nfrom the detail\n  %v", what, back, got)
				}
				if got != nil && got.GetReason() == string(fence.ReasonBusy) {
					if r := got.GetRemaining().AsDuration(); r <= 0 || r > time.Hour {
						t.Fatalf("%s: BUSY remaining %s, want in (0, 1h]", what, r)
					}
					got = proto.Clone(got).(*fencev1.ErrorDetail)
					got.Remaining = nil
				}
				if !proto.Equal(got, want) {
					t.Fatalf("%s: detail\n  %v\nwant\n  %v", what, got, want)
				}
			}

			ta := must(acquire(p+"busy", "A", time.Hour, 0))
			_, err := acquire(p+"busy", "B", time.Hour, 0)
			want("BUSY", err, connect.CodeResourceExhausted, &fencev1.ErrorDetail{Reason: "BUSY", Name: p + "busy", Holder: "A", HolderToken: ta})
			_, err = acquire(p+"busy", "B", time.Hour, fence.MinTTL)
			want("BUSY after a wait", err, connect.CodeResourceExhausted, &fencev1.ErrorDetail{Reason: "BUSY", Name: p + "busy", Holder: "A", HolderToken: ta, Waited: true})

			// RESOURCE_EXHAUSTED: a second waiter over max_waiters_per_lock 1.
			wctx, cancel := context.WithCancel(ctx)
			waited := make(chan error, 1)
			go func() {
				_, err := c.locks.Acquire(wctx, connect.NewRequest(&fencev1.AcquireRequest{Name: p + "busy", Owner: "W", Ttl: hour, Wait: hour}))
				waited <- err
			}()
			until(t, "the first waiter queues", func() bool { return lockOf(t, url, p+"busy").GetWaiters() == 1 })
			_, err = acquire(p+"busy", "C", time.Hour, time.Hour)
			want("RESOURCE_EXHAUSTED", err, connect.CodeResourceExhausted, &fencev1.ErrorDetail{Reason: "RESOURCE_EXHAUSTED",
				Limit: `waiters on lock "` + p + `busy" (config.max_waiters_per_lock)`, Bound: "at most 1", Got: "1"})
			cancel()
			<-waited

			// STALE_TOKEN, then OP_CONFLICT, on a resource.
			tb := must(acquire(p+"stale", "A", time.Hour, 0))
			if _, err := c.res.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: p + "r", Token: ta, Value: []byte("a"), OpId: p + "op"})); err != nil {
				t.Fatal(err)
			}
			if _, err := c.res.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: p + "r", Token: tb, Value: []byte("b")})); err != nil {
				t.Fatal(err)
			}
			_, err = c.res.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: p + "r", Token: ta, Value: []byte("c")}))
			want("STALE_TOKEN", err, connect.CodeFailedPrecondition, &fencev1.ErrorDetail{Reason: "STALE_TOKEN", Name: p + "r", Token: ta, LastAccepted: tb})
			_, err = c.res.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: p + "r", Token: ta, Value: []byte("other"), OpId: p + "op"}))
			want("OP_CONFLICT", err, connect.CodeAlreadyExists, &fencev1.ErrorDetail{Reason: "OP_CONFLICT", Field: "op_id", Id: p + "op"})

			// NOT_HOLDER: a release repeated.
			tn := must(acquire(p+"nh", "A", time.Hour, 0))
			for range 2 {
				_, err = c.locks.Release(ctx, connect.NewRequest(&fencev1.ReleaseRequest{Name: p + "nh", Token: tn}))
			}
			want("NOT_HOLDER", err, connect.CodeFailedPrecondition, &fencev1.ErrorDetail{Reason: "NOT_HOLDER", Name: p + "nh", Token: tn})

			// LEASE_EXPIRED: a renew after the lease expired (Get tells).
			te := must(acquire(p+"exp", "A", fence.MinTTL, 0))
			expired(t, url, p+"exp")
			_, err = c.locks.Renew(ctx, connect.NewRequest(&fencev1.RenewRequest{Name: p + "exp", Token: te}))
			want("LEASE_EXPIRED", err, connect.CodeFailedPrecondition, &fencev1.ErrorDetail{Reason: "LEASE_EXPIRED", Name: p + "exp", Token: te})

			// UNKNOWN_TOKEN: a token never issued; lastToken the last issued.
			last := uint64(memOf(s).LastToken())
			_, err = c.locks.Renew(ctx, connect.NewRequest(&fencev1.RenewRequest{Name: p + "exp", Token: last + 1000}))
			want("UNKNOWN_TOKEN", err, connect.CodeFailedPrecondition, &fencev1.ErrorDetail{Reason: "UNKNOWN_TOKEN", Token: last + 1000, LastAccepted: last})

			// SESSION_EXPIRED: a closed session named.
			id := openSession(t, sc, time.Hour)
			if _, err := sc.Close(ctx, connect.NewRequest(&fencev1.CloseSessionRequest{Session: id})); err != nil {
				t.Fatal(err)
			}
			_, err = c.locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: p + "s", Session: &fencev1.SessionRef{Id: id, Seq: 1}}))
			want("SESSION_EXPIRED", err, connect.CodeFailedPrecondition, &fencev1.ErrorDetail{Reason: "SESSION_EXPIRED", Session: id})

			// INVALID_ARGUMENT: field, bound and the value refused.
			_, err = acquire(p+"inv", "A", 25*time.Hour, 0)
			var inv *fence.InvalidError
			if !errors.As(apierr.FromConnect(err), &inv) {
				t.Fatalf("acquire with ttl 25h = %v, want INVALID_ARGUMENT", err)
			}
			want("INVALID_ARGUMENT", err, connect.CodeInvalidArgument, &fencev1.ErrorDetail{Reason: "INVALID_ARGUMENT", Field: "ttl", Bound: inv.Bound, Got: "25h0m0s"})
		})
	}
}
