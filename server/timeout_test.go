package server

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// TestMalformedDeadlineHeaders: a Connect-Timeout-Ms that is not 1-10
// digits or not positive is refused with invalid_argument and a detail
// naming the header and its bound. Before, "abc" and 11 digits got
// Connect's invalid_argument with no detail, and "0" or "-5" a 504
// deadline_exceeded at once.
func TestMalformedDeadlineHeaders(t *testing.T) {
	_, url := startServer(t)
	body := []byte(`{"name":"deadline-headers"}`)
	for _, v := range []string{"abc", "12345678901", "0", "000", "-5", "+5", "1.5"} {
		r := postJSON(t, url, "/fence.v1.LockService/Get", body, map[string]string{"Connect-Timeout-Ms": v})
		wantInvalidJSON(t, "Connect-Timeout-Ms "+v, r, "Connect-Timeout-Ms", connectTimeoutBound, "invalid Connect-Timeout-Ms ")
	}
	for _, v := range []string{"1", "100", "9999999999"} {
		if r := postJSON(t, url, "/fence.v1.LockService/Get", body, map[string]string{"Connect-Timeout-Ms": v}); r.status != http.StatusOK {
			t.Fatalf("Connect-Timeout-Ms %s: %d %s; want 200", v, r.status, r.body)
		}
	}

	// gRPC: a malformed grpc-timeout gets the same detail; "0n" (what a
	// client sends for a deadline already past) keeps its meaning.
	grpc := protocols(url)[1]
	for _, v := range []string{"abc", "5", "123456789S", "-5S", "5s"} {
		req := connect.NewRequest(&fencev1.GetRequest{Name: "deadline-headers"})
		req.Header().Set("Grpc-Timeout", v)
		_, err := grpc.locks.Get(context.Background(), req)
		checkInvalid(t, err, "grpc-timeout")
	}
	req := connect.NewRequest(&fencev1.GetRequest{Name: "deadline-headers"})
	req.Header().Set("Grpc-Timeout", "100S")
	if _, err := grpc.locks.Get(context.Background(), req); err != nil {
		t.Fatalf("grpc-timeout 100S: %v; want the lock", err)
	}
	req = connect.NewRequest(&fencev1.GetRequest{Name: "deadline-headers"})
	req.Header().Set("Grpc-Timeout", "0n")
	if _, err := grpc.locks.Get(context.Background(), req); connect.CodeOf(err) != connect.CodeDeadlineExceeded {
		t.Fatalf("grpc-timeout 0n: %v; want deadline_exceeded", err)
	}
}
