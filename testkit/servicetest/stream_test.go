package servicetest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// TestStreamThroughFollower: a session stream served by a follower, whose
// server passes each op to the leader (the forwarder) as a unary call with
// the stream's session, seq and ack: grants, exactly-once by seq (a
// resent seq is answered from the saved result, marked replayed), reads at
// the leader, refusals with their facts, and a waiting acquire withdrawn
// on the leader when the stream ends.
func TestStreamThroughFollower(t *testing.T) {
	t.Parallel() // on stores and clusters of its own
	leader, follower := startCluster(t)
	streamScenario(t, leader.s.Node().Service(), follower.url)
}

// TestStreamSingleNode: the same on a single node (no forwarding).
func TestStreamSingleNode(t *testing.T) {
	t.Parallel() // on stores and clusters of its own
	s := startSingle(t)
	streamScenario(t, s.s.Node().Service(), s.url)
}

// streamScenario runs the stream's calls on the server at url and checks
// their effects through atLeader, the leader's own Service.
func streamScenario(t *testing.T, atLeader fence.Service, url string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: p}}
	defer hc.CloseIdleConnections()
	sessions := fencev1connect.NewSessionServiceClient(hc, url)

	// The session outlives the scenario on any machine (no keepalive is
	// sent): with 30s, a scenario slower than that lost x with the
	// session. A waiter not withdrawn with the stream fails waiters(0) at
	// ctx's end (a hang guard, not a timing assertion).
	open, err := sessions.Open(ctx, connect.NewRequest(&fencev1.OpenSessionRequest{Ttl: durationpb.New(time.Hour)}))
	if err != nil {
		t.Fatal(err)
	}
	id := open.Msg.GetSession().GetId()
	held, err := atLeader.Acquire(ctx, fence.AcquireRequest{Name: "held", Owner: "other", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}

	sctx, endStream := context.WithCancel(ctx)
	defer endStream()
	st := sessions.Stream(sctx)
	call := uint64(0)
	ask := func(seq, ack uint64, m *fencev1.SessionRequest) *fencev1.SessionReply {
		t.Helper()
		call++
		m.Session, m.Call, m.Seq, m.Ack = id, call, seq, ack
		if err := st.Send(m); err != nil {
			t.Fatalf("send call %d: %v", call, err)
		}
		r, err := st.Receive()
		if err != nil {
			t.Fatalf("receive call %d: %v", call, err)
		}
		if r.GetCall() != call {
			t.Fatalf("reply to call %d, want %d: %v", r.GetCall(), call, r)
		}
		return r
	}

	r := ask(1, 1, &fencev1.SessionRequest{Op: &fencev1.SessionRequest_Acquire{Acquire: &fencev1.AcquireRequest{Name: "x", Owner: "me"}}})
	tok := r.GetAcquire().GetLease().GetToken()
	if tok <= uint64(held.Lease.Token) || r.GetReplayed() {
		t.Fatalf("acquire on the stream: %v, want a new grant above %d", r, held.Lease.Token)
	}
	add := &fencev1.SessionRequest_Add{Add: &fencev1.AddRequest{Resource: "r", Token: tok, Delta: 5}}
	if r := ask(2, 2, &fencev1.SessionRequest{Op: add}); r.GetAdd().GetValue() != 5 || r.GetReplayed() {
		t.Fatalf("add: %v, want value 5, not replayed", r)
	}
	if r := ask(2, 2, &fencev1.SessionRequest{Op: add}); r.GetAdd().GetValue() != 5 || !r.GetReplayed() {
		t.Fatalf("add resent with the same seq: %v, want the saved value 5, replayed", r)
	}
	if r := ask(0, 0, &fencev1.SessionRequest{Op: &fencev1.SessionRequest_Read{Read: &fencev1.ReadRequest{Resource: "r"}}}); string(r.GetRead().GetState().GetValue()) != "5" {
		t.Fatalf("read: %v, want value 5", r)
	}
	busy := ask(3, 3, &fencev1.SessionRequest{Op: &fencev1.SessionRequest_Acquire{Acquire: &fencev1.AcquireRequest{Name: "held", Owner: "me"}}})
	if d := busy.GetError(); d.GetReason() != string(fence.ReasonBusy) || d.GetHolder() != "other" || d.GetHolderToken() != uint64(held.Lease.Token) {
		t.Fatalf("acquire of a held lock: %v, want BUSY naming holder other, token %d", busy, held.Lease.Token)
	}

	// A waiting acquire, then the stream ends: the leader withdraws it.
	call++
	if err := st.Send(&fencev1.SessionRequest{Call: call, Seq: 4, Ack: 4, Op: &fencev1.SessionRequest_Acquire{Acquire: &fencev1.AcquireRequest{
		Name: "held", Owner: "me", Wait: durationpb.New(time.Hour)}}}); err != nil {
		t.Fatal(err)
	}
	waiters := func(want int) {
		t.Helper()
		for {
			li, err := atLeader.Get(ctx, "held")
			if err != nil {
				t.Fatal(err)
			}
			if li.Waiters == want {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("lock held: %d waiters, want %d", li.Waiters, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waiters(1)
	// The client goes: its context ends and it stops reading, which
	// resets the stream (canceling alone does not, once reply headers
	// came while the request side is open: net/http's HTTP/2 client).
	endStream()
	st.CloseResponse()
	waiters(0)

	// What the stream did is the leader's state.
	li, err := atLeader.Get(ctx, "x")
	if err != nil || li.Lease == nil || uint64(li.Lease.Token) != tok {
		t.Fatalf("lock x at the leader: %+v %v, want held with token %d (lost: the session ended, as it does when its waiter stays queued until the session's TTL instead of being withdrawn with the stream)", li, err, tok)
	}
}
