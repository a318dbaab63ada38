package server

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/leanwire"
	"github.com/fenceworks/fence/state"
)

// TestLeanSilentPeerIsCut: a lean session connection on which nothing
// arrives for Config.SessionIdleTimeout (a peer gone without a FIN: no
// ping, no request) is closed by the server, freeing its slot, while the
// session itself lives on.
func TestLeanSilentPeerIsCut(t *testing.T) {
	s, err := newOverFake(t, Config{SessionIdleTimeout: 50 * time.Millisecond}, state.Config{})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveLeanPort(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open, err := s.Service().OpenSession(ctx, fence.OpenSessionRequest{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() }) // a test that fails does not hang
	defer stop()
	w := bufio.NewWriter(c)
	_ = leanwire.WriteFrame(w, leanwire.KindHello, leanwire.Hello{Version: leanwire.Version}.Append(nil))
	m, _ := proto.Marshal(&fencev1.SessionRequest{Session: open.Session.ID, Call: 1, Op: &fencev1.SessionRequest_KeepAlive{KeepAlive: &fencev1.KeepAliveRequest{}}})
	_ = leanwire.WriteFrame(w, leanwire.KindRequest, m)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	// Then silence: read until the server closes the connection.
	r := bufio.NewReader(c)
	var buf []byte
	for {
		if _, _, err := leanwire.ReadFrame(r, 1<<20, &buf); err != nil {
			if ctx.Err() != nil {
				t.Fatal("the server kept a silent lean connection open")
			}
			break
		}
	}
	if _, err := s.Service().KeepAlive(ctx, fence.KeepAliveRequest{ID: open.Session.ID}); err != nil {
		t.Fatalf("the session ended with its connection: %v", err)
	}
}
