package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/leanwire"
	"github.com/fenceworks/fence/state"
)

// TestLeanEveryPipelinedRequestAnswered: a stream's replies are sent by
// whichever goroutine queued one and found no other sending
// (flushReplies); one that found another sending leaves its reply to it.
// Many requests sent at once, answered by workers finishing together,
// must each get exactly one reply: a reply left in the queue by that
// hand-over would leave its caller waiting (the test's deadline ends it).
func TestLeanEveryPipelinedRequestAnswered(t *testing.T) {
	s, err := newOverFake(t, Config{MaxStreamRequests: 4096}, state.Config{})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveLeanPort(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard
	defer cancel()
	open, err := s.Service().OpenSession(ctx, fence.OpenSessionRequest{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	l := dialRawLean(ctx, t, addr, "")
	const rounds, n = 20, 200
	call := uint64(0)
	for round := range rounds {
		for i := range n {
			call++
			m := &fencev1.SessionRequest{Call: call, Op: &fencev1.SessionRequest_Acquire{Acquire: &fencev1.AcquireRequest{
				Name: fmt.Sprintf("p/%d/%d", round, i), Owner: "t"}}}
			if call == 1 {
				m.Session = open.Session.ID
			}
			b, err := proto.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := leanwire.WriteFrame(l.w, leanwire.KindRequest, b); err != nil {
				t.Fatal(err)
			}
		}
		l.flush()
		seen := map[uint64]bool{}
		for range n {
			r, e, err := l.next()
			if err != nil || e != nil {
				t.Fatalf("round %d: the stream ended after %d of %d replies: %+v, %v", round, len(seen), n, e, err)
			}
			if r.GetError() != nil {
				t.Fatalf("round %d: call %d refused: %s", round, r.GetCall(), r.GetMessage())
			}
			if seen[r.GetCall()] {
				t.Fatalf("round %d: two replies to call %d", round, r.GetCall())
			}
			seen[r.GetCall()] = true
		}
	}
}
