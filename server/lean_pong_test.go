package server

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/leanwire"
	"github.com/fenceworks/fence/state"
)

// hangGuardLean bounds a read of this test (a hang guard, not a timing
// assertion).
const hangGuardLean = 20 * time.Second

// A lean client whose hello asks for pongs gets one at once (it learns the
// server answers pings) and one for every ping, in order with the replies;
// a client that does not ask (every client before pongs) never gets one:
// its first frame after a request is that request's reply.
func TestLeanPingsAnsweredOnlyWhenAsked(t *testing.T) {
	s, err := newOverFake(t, Config{}, state.Config{})
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
	ka := func(call uint64) *fencev1.SessionRequest {
		return &fencev1.SessionRequest{Session: open.Session.ID, Call: call, Op: &fencev1.SessionRequest_KeepAlive{KeepAlive: &fencev1.KeepAliveRequest{}}}
	}
	for _, asked := range []bool{true, false} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		stop := context.AfterFunc(ctx, func() { c.Close() })
		// A server that never answers must fail the test, not hang it.
		_ = c.SetReadDeadline(time.Now().Add(hangGuardLean))
		l := &rawLean{t: t, c: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}
		_ = leanwire.WriteFrame(l.w, leanwire.KindHello, leanwire.Hello{Version: leanwire.Version, Pongs: asked}.Append(nil))
		l.request(ka(1))
		_ = leanwire.WriteFrame(l.w, leanwire.KindPing, nil)
		l.flush()
		var kinds []byte
		for len(kinds) < 3 {
			kind, payload, err := leanwire.ReadFrame(l.r, 1<<23, &l.buf)
			if err != nil {
				t.Fatalf("asked=%v: after %v: %v", asked, kinds, err)
			}
			if kind == leanwire.KindPong && len(payload) != 0 {
				t.Fatalf("asked=%v: a pong with a payload of %d bytes", asked, len(payload))
			}
			kinds = append(kinds, kind)
			if !asked && len(kinds) == 1 {
				// The ping is not answered: a second request's reply comes
				// next, and no pong in between.
				l.request(ka(2))
				l.flush()
			}
			if !asked && len(kinds) == 2 {
				break
			}
		}
		pongs := 0
		for _, k := range kinds {
			if k == leanwire.KindPong {
				pongs++
			}
		}
		switch {
		case asked && (kinds[0] != leanwire.KindPong || pongs != 2):
			t.Errorf("asked for pongs: frames %v, want a pong first and one for the ping (%d = pong, %d = reply)", kinds, leanwire.KindPong, leanwire.KindReply)
		case !asked && pongs != 0:
			t.Errorf("not asked: frames %v include a pong", kinds)
		}
		stop()
		c.Close()
	}
}
