//go:build e2e

package system_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// `fence serve` proposes the session rules from its flags: with no flag
// the caps of state.DefaultConfig and the daemon's per-principal quotas (a serve that proposed 0, "no cap",
// passed every other test), and --max-sessions caps live sessions, with
// the refusal naming the limit. A restart with a higher cap applies it to
// later opens only; the sessions opened before stay.
func TestServeProposesSessionRules(t *testing.T) {
	srv := startServer(t)
	if log := srv.Log(); !strings.Contains(log, "MaxSessions:100000 MaxSessionResults:4096") ||
		!strings.Contains(log, "MaxSessionsPerPrincipal:10000 MaxWaitersPerPrincipal:10000 MaxIDsPerPrincipal:100000") {
		t.Fatalf("serve without session flags did not propose the default caps and quotas:\n%s", log)
	}
	srv.Stop()

	srv = startServerIn(t, srv.DataDir(), "--max-sessions", "2", "--max-session-results", "8", "--max-streams", "1")
	sessions := fencev1connect.NewSessionServiceClient(&http.Client{Timeout: hangGuard}, srv.URL())
	open := func() (uint64, error) {
		resp, err := sessions.Open(context.Background(), connect.NewRequest(&fencev1.OpenSessionRequest{Ttl: durationpb.New(time.Minute)}))
		if err != nil {
			return 0, apierr.FromConnect(err)
		}
		return resp.Msg.GetSession().GetId(), nil
	}
	for i := 0; i < 2; i++ {
		if _, err := open(); err != nil {
			t.Fatalf("open %d of 2: %v", i+1, err)
		}
	}
	_, err := open()
	var limit *fence.ResourceExhaustedError
	if !errors.As(err, &limit) || !strings.Contains(limit.Bound, "2") {
		t.Fatalf("third open with --max-sessions 2: %v, want RESOURCE_EXHAUSTED at most 2", err)
	}

	// --max-streams 1: a second stream is refused while the first is open.
	streams := fencev1connect.NewSessionServiceClient(h2cClient(), srv.URL(), connect.WithGRPC())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := streams.Stream(ctx)
	if err := first.Send(&fencev1.SessionRequest{Session: 1, Call: 1, Op: &fencev1.SessionRequest_KeepAlive{KeepAlive: &fencev1.KeepAliveRequest{}}}); err != nil {
		t.Fatal(err)
	}
	if r, err := first.Receive(); err != nil || r.GetKeepAlive() == nil {
		t.Fatalf("first stream's keepalive: %v %v", r, err) // it is open and counted now
	}
	second := streams.Stream(ctx)
	second.Send(&fencev1.SessionRequest{Session: 1})
	_, err = second.Receive()
	if !errors.As(apierr.FromConnect(err), &limit) || !strings.Contains(limit.Limit, "max_streams") {
		t.Fatalf("second stream with --max-streams 1: %v, want RESOURCE_EXHAUSTED naming max_streams", err)
	}
}
