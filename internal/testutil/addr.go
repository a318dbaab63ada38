package testutil

import (
	"net"
	"testing"
)

// FreeAddr returns a loopback address that was free a moment ago. Another
// process may take it before the caller binds it; callers that start a
// server process on it retry on bind failure.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
