package client_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/client"
)

func bearerReq[T any](m *T, secret string) *connect.Request[T] {
	r := connect.NewRequest(m)
	r.Header().Set("Authorization", "Bearer "+secret)
	return r
}

// WithBearerToken against a server with auth on: without a token the
// client's calls are refused UNAUTHENTICATED (typed, not retried); with
// A's token A acquires and releases; B, another principal, cannot keep
// alive or close A's session even knowing its id.
func TestBearerToken(t *testing.T) {
	url, _ := testServer(t)
	ctx := ctxFor(t)
	auth := fencev1connect.NewAuthServiceClient(http.DefaultClient, url)
	boot, err := auth.Bootstrap(ctx, connect.NewRequest(&fencev1.AuthBootstrapRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	admin := boot.Msg.GetSecret()
	if _, err := auth.GrantRole(ctx, bearerReq(&fencev1.GrantRoleRequest{Role: "app", Permissions: []string{"lock:jobs/", "read:jobs/"}}, admin)); err != nil {
		t.Fatal(err)
	}
	token := func() string {
		res, err := auth.CreateToken(ctx, bearerReq(&fencev1.CreateTokenRequest{Roles: []string{"app"}}, admin))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg.GetSecret()
	}
	a, b := token(), token()
	if _, err := auth.SetEnabled(ctx, bearerReq(&fencev1.AuthSetEnabledRequest{Enabled: true}, admin)); err != nil {
		t.Fatal(err)
	}

	anon := newClientFor(t, url, client.WithFailFast())
	if _, err := anon.Acquire(ctx, "jobs/x", client.TTL(time.Minute)); !errors.Is(err, fence.ErrUnauthenticated) {
		t.Fatalf("acquire without a token: %v, want UNAUTHENTICATED", err)
	}
	ca := newClientFor(t, url, client.WithBearerToken(a))
	lease, err := ca.Acquire(ctx, "jobs/x") // bound to A's session
	if err != nil {
		t.Fatalf("A acquires: %v", err)
	}
	if _, err := ca.Acquire(ctx, "other/x", client.TTL(time.Minute)); !errors.Is(err, fence.ErrPermissionDenied) {
		t.Fatalf("A outside its prefix: %v, want PERMISSION_DENIED", err)
	}
	// B knows A's session id: keepalive and close are refused, and A's
	// lease is still A's.
	sessions := fencev1connect.NewSessionServiceClient(http.DefaultClient, url)
	id := ca.SessionID()
	for what, call := range map[string]func() error{
		"keepalive": func() error {
			_, err := sessions.KeepAlive(ctx, bearerReq(&fencev1.KeepAliveRequest{Session: id}, b))
			return err
		},
		"close": func() error {
			_, err := sessions.Close(ctx, bearerReq(&fencev1.CloseSessionRequest{Session: id}, b))
			return err
		},
	} {
		var pd *fence.PermissionDeniedError
		if err := apierr.FromConnect(call()); !errors.As(err, &pd) || pd.What != "session" {
			t.Fatalf("B's %s of A's session %d: %v, want PERMISSION_DENIED on session", what, id, err)
		}
	}
	if err := lease.Renew(ctx); err != nil {
		t.Fatalf("A renews after B's attempts: %v", err)
	}
	if err := lease.Release(context.Background()); err != nil {
		t.Fatalf("A releases: %v", err)
	}
}
