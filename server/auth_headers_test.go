package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// A request carrying two Authorization headers is refused UNAUTHENTICATED
// saying so, whichever comes first (an outside test was served as
// whichever header the server read first), over plain JSON and gRPC; so is
// a bearer token with something after it. One good header is served.
func TestAuthRefusesTwoAuthorizationHeaders(t *testing.T) {
	f := newAuthFixture(t)
	post := func(auths ...string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, f.url+fencev1connect.LockServiceGetProcedure, strings.NewReader(`{"name":"jobs/x"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		for _, a := range auths {
			req.Header.Add("Authorization", a)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(f.creds["read"]); code != http.StatusOK {
		t.Fatalf("one good header: %d %s", code, body)
	}
	for _, pair := range [][2]string{{"read", "lock"}, {"lock", "read"}, {"admin", "none-valid"}, {"read", "read"}} {
		a, b := f.creds[pair[0]], f.creds[pair[1]]
		if b == "" {
			b = "Bearer x"
		}
		code, body := post(a, b)
		if code != http.StatusUnauthorized || !strings.Contains(body, "more than one Authorization header") {
			t.Errorf("headers %s then %s: %d %s, want 401 naming more than one Authorization header", pair[0], pair[1], code, body)
		}
	}
	code, body := post(f.creds["read"] + " trailing")
	if code != http.StatusUnauthorized || !strings.Contains(body, "not one word") {
		t.Errorf("a bearer with trailing garbage: %d %s, want 401 saying the token is not one word", code, body)
	}

	c := fencev1connect.NewLockServiceClient(h2cClient(), f.url, connect.WithGRPC())
	req := connect.NewRequest(&fencev1.GetRequest{Name: "jobs/x"})
	req.Header().Add("Authorization", f.creds["admin"])
	req.Header().Add("Authorization", f.creds["lock"])
	_, err := c.Get(context.Background(), req)
	if connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.Contains(err.Error(), "more than one Authorization header") {
		t.Errorf("gRPC with two Authorization headers: %v, want UNAUTHENTICATED naming more than one Authorization header", err)
	}
}
