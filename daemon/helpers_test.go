package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

// hangGuard bounds a wait for something that should happen at once.
const hangGuard = 30 * time.Second

// startServer runs a daemon (real node, durable raft in a temp dir) on a
// loopback port until the test ends and returns its base URL.
func startServer(tb testing.TB) (*Daemon, string) {
	tb.Helper()
	d, err := New(Config{DataDir: tb.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Serve(ln) }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			tb.Errorf("Shutdown: %v", err)
		}
		if err := <-done; err != nil {
			tb.Errorf("Serve: %v", err)
		}
	})
	return d, "http://" + ln.Addr().String()
}

type clients struct {
	name  string
	locks fencev1connect.LockServiceClient
}

// protocols are the API's clients over Connect (JSON).
func protocols(url string) []clients {
	h1 := &http.Client{Transport: &http.Transport{}}
	return []clients{{"connect-json", fencev1connect.NewLockServiceClient(h1, url, connect.WithProtoJSON())}}
}

// until polls cond until it holds, failing the test after hangGuard.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, hangGuard)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// checkInvalid asserts err is InvalidArgument with a detail naming field
// and its bound.
func checkInvalid(t *testing.T, err error, field string) {
	t.Helper()
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("err = %v, want invalid_argument", err)
	}
	var inv *fence.InvalidError
	if !errors.As(apierr.FromConnect(err), &inv) || inv.Field != field || inv.Bound == "" {
		t.Fatalf("err = %v, want an INVALID_ARGUMENT detail for field %q with a bound", err, field)
	}
}
