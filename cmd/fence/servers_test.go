//go:build e2e

package main

import (
	"net"
	"strings"
	"testing"
)

// TestServerList: FENCE_SERVER and --server take a cluster's nodes as a
// comma-separated list: a command works while one of them answers (the
// first here is dead), and fails as unreachable, naming them all, when
// none does.
func TestServerList(t *testing.T) {
	live, stop, err := startLabServer()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	dead := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		return "http://" + ln.Addr().String()
	}
	d1, d2 := dead(), dead()

	t.Setenv("FENCE_SERVER", d1+","+live)
	if code, out, stderr := runCLI("acquire", "list-lock", "--ttl", "5s", "--json"); code != exitOK || !strings.Contains(out, `"token"`) {
		t.Fatalf("acquire via FENCE_SERVER=%s,%s: exit %d, %q %q", d1, live, code, out, stderr)
	}
	if code, _, stderr := runCLI("--server", d2+", "+live, "read", "list-res"); code != exitOK {
		t.Fatalf("read via --server %s,%s: exit %d, %q", d2, live, code, stderr)
	}
	code, out, stderr := runCLI("--server", d1+","+d2, "read", "list-res", "--json")
	if code != exitError || !strings.Contains(stderr, d1) || !strings.Contains(stderr, d2) || !strings.Contains(out, `"unreachable":"`+d1+","+d2+`"`) {
		t.Fatalf("read with every server dead: exit %d, stdout %q, stderr %q; want exit %d naming both", code, out, stderr, exitError)
	}
	if code, _, _ := runCLI("--server", d1+",ftp://x", "read", "r"); code == exitOK {
		t.Fatal("a bad URL in the list was accepted")
	}
}
