package client_test

import (
	"net/http"
	"sync"
	"testing"

	"github.com/fenceworks/fence/client"
)

// TestGRPCSpeaksHTTP2ConnectHTTP1: with the Client's own HTTP client,
// ProtocolGRPC is gRPC over HTTP/2 (h2c for http://), as gRPC servers and
// proxies require, and the Connect protocols are plain HTTP/1.1 requests.
// The door accepts both, so it sees the version the client chose; it
// answers 404 (Unimplemented, not retried), which ends the call.
//
// Kills the negation mutant of client.go's `p == ProtocolGRPC`: it gives
// HTTP/2 to Connect and HTTP/1.1 to gRPC.
func TestGRPCSpeaksHTTP2ConnectHTTP1(t *testing.T) {
	for _, tc := range []struct {
		name  string
		proto client.Protocol
		major int
	}{
		{"grpc", client.ProtocolGRPC, 2},
		{"connect", client.ProtocolConnect, 1},
		{"json", client.ProtocolConnectJSON, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var seen []string
			door := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen = append(seen, r.Proto)
				mu.Unlock()
				http.NotFound(w, r)
			})
			var ps http.Protocols
			ps.SetHTTP1(true)
			ps.SetUnencryptedHTTP2(true)
			srv := &http.Server{Handler: door, Protocols: &ps}
			ln := listenLoopback(t)
			go srv.Serve(ln)
			t.Cleanup(func() { srv.Close() })

			c := newClientFor(t, "http://"+ln.Addr().String(), client.WithProtocol(tc.proto), client.WithoutSession())
			if _, err := c.Get(ctxFor(t), uniq(t)); err == nil {
				t.Fatal("Get succeeded against a door that answers 404")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) == 0 {
				t.Fatal("the request never reached the door")
			}
			for _, p := range seen {
				if want := map[int]string{1: "HTTP/1.1", 2: "HTTP/2.0"}[tc.major]; p != want {
					t.Fatalf("requests arrived as %v, want %s", seen, want)
				}
			}
		})
	}
}
