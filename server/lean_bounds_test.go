package server

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/leanwire"
	"github.com/fenceworks/fence/state"
)

// TestLeanInFlightBoundRefusedNamingIt: on a lean connection, a request
// beyond Config.MaxStreamRequests in flight is answered at once with
// RESOURCE_EXHAUSTED naming config.max_stream_requests and its bound (as
// on Stream: the same dispatch), while the one in flight goes on waiting.
func TestLeanInFlightBoundRefusedNamingIt(t *testing.T) {
	s, err := newOverFake(t, Config{MaxStreamRequests: 1}, state.Config{})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveLeanPort(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The lock is held by another, so the first acquire waits.
	if _, err := s.Service().Acquire(ctx, fence.AcquireRequest{Name: "busy", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	open, err := s.Service().OpenSession(ctx, fence.OpenSessionRequest{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	w := bufio.NewWriter(c)
	_ = leanwire.WriteFrame(w, leanwire.KindHello, leanwire.Hello{Version: leanwire.Version}.Append(nil))
	for i, name := range []string{"busy", "free"} {
		m := &fencev1.SessionRequest{Call: uint64(i + 1), Seq: uint64(i + 1), Ack: 1,
			Op: &fencev1.SessionRequest_Acquire{Acquire: &fencev1.AcquireRequest{Name: name, Wait: durationpb.New(time.Minute)}}}
		if i == 0 {
			m.Session = open.Session.ID
		}
		b, _ := proto.Marshal(m)
		_ = leanwire.WriteFrame(w, leanwire.KindRequest, b)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	var buf []byte
	kind, payload, err := leanwire.ReadFrame(r, 1<<20, &buf)
	if err != nil {
		t.Fatalf("no reply: %v", err)
	}
	if kind != leanwire.KindReply {
		t.Fatalf("frame kind %d, want a reply", kind)
	}
	var rep fencev1.SessionReply
	if err := proto.Unmarshal(payload, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.GetCall() != 2 {
		t.Fatalf("first reply is to call %d (%v), want call 2's refusal (call 1 still waits)", rep.GetCall(), &rep)
	}
	var re *fence.ResourceExhaustedError
	if err := apierr.FromDetail(rep.GetError()); !errors.As(err, &re) || !strings.Contains(re.Limit, "max_stream_requests") || !strings.Contains(re.Bound, "1") {
		t.Fatalf("call 2 answered %v, want RESOURCE_EXHAUSTED naming config.max_stream_requests and its bound 1", &rep)
	}
}
