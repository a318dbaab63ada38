package testutil

import (
	"testing"

	"github.com/fenceworks/fence/testkit/freeport"
)

// FreeAddr returns a loopback address (127.0.0.1:port) that was free a
// moment ago and that no earlier call in this process returned (see
// freeport.Pick); it fails the test when none can be had.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeport.Pick()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
