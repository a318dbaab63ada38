package client_test

import (
	"fmt"
	"os"
	"testing"
)

// TestDefaultOwnerIsHostnameAndPid: a lease acquired without WithOwner is
// owned by "hostname:pid" (Owner's documented default), what an operator
// reads in `fence get` to find the process holding a lock. "unknown"
// replaces the host name only when os.Hostname fails or is empty.
//
// Kills both negation mutants of ids.go's `err != nil || host == ""`: each
// names every host "unknown" on a machine whose hostname works.
func TestDefaultOwnerIsHostnameAndPid(t *testing.T) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	want := fmt.Sprintf("%s:%d", host, os.Getpid())

	ctx := ctxFor(t)
	c := newClient(t)
	name := uniq(t)
	l, err := c.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if got := l.Owner(); got != want {
		t.Fatalf("lease owner %q, want %q", got, want)
	}
	info, err := c.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if info.Lease == nil || info.Lease.Owner != want {
		t.Fatalf("server sees lease %+v, want owner %q", info.Lease, want)
	}
}
