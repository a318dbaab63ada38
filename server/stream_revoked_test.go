package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// A session stream whose token is revoked while it is open ends
// (UNAUTHENTICATED) even if it sends nothing more, so it gives back its
// slots of --max-streams and of its principal's quota (an outside test
// revoked a token whose idle streams went on holding them).
func TestStreamEndsWhenItsTokenIsRevoked(t *testing.T) {
	f := newAuthFixture(t)
	out := f.must(fencev1connect.AuthServiceCreateTokenProcedure, f.creds["admin"], `{"roles":["locker"],"description":"soon revoked"}`)
	tok, id := bearer(out["secret"].(string)), out["token"].(map[string]any)["id"].(string)
	f.creds["soon"] = tok
	session := openAs(f, "soon")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard
	defer cancel()
	st := fencev1connect.NewSessionServiceClient(h2cClient(), f.url, connect.WithGRPC()).Stream(ctx)
	st.RequestHeader().Set("Authorization", tok)
	if err := st.Send(&fencev1.SessionRequest{Session: session, Call: 1, Op: &fencev1.SessionRequest_KeepAlive{KeepAlive: &fencev1.KeepAliveRequest{}}}); err != nil {
		t.Fatal(err)
	}
	if r, err := st.Receive(); err != nil || r.GetKeepAlive() == nil {
		t.Fatalf("the stream's first reply: %v, %v", r, err)
	}
	f.must(fencev1connect.AuthServiceRevokeTokenProcedure, f.creds["admin"], fmt.Sprintf(`{"id":%q}`, id))
	// Nothing more is sent: the server ends the stream by itself.
	defer st.CloseResponse()
	defer st.CloseRequest()
	ended := make(chan error, 1)
	go func() {
		_, err := st.Receive()
		ended <- err
	}()
	select {
	case err := <-ended:
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("the idle stream after its token was revoked: %v, want it ended unauthenticated", err)
		}
	case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("the idle stream of a revoked token is still open after 30s")
	}
}
