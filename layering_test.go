//go:build e2e

package fence_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The layering of docs/design.md §9, held by the go command's view of the
// imports (go list -deps, so build tags and transitive imports count):
// dependencies point inward, and a program that embeds only the client and
// a guard stays small.

const mod = "github.com/fenceworks/fence"

// deps lists the packages pkgs import, directly or not (themselves included).
func deps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	args := append([]string{"list", "-deps"}, pkgs...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps %v: %v\n%s", pkgs, err, ee.Stderr)
		}
		t.Fatalf("go list -deps %v: %v", pkgs, err)
	}
	return strings.Fields(string(out))
}

// forbid fails for every dependency of pkgs that starts with one of the
// forbidden prefixes.
func forbid(t *testing.T, pkgs []string, forbidden ...string) {
	t.Helper()
	for _, d := range deps(t, pkgs...) {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("%v imports %s (forbidden: %s)", pkgs, d, f)
			}
		}
	}
}

// forbidDirect fails for every package pkg imports itself (not through
// another package) that starts with one of the forbidden prefixes.
func forbidDirect(t *testing.T, pkg string, forbidden ...string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, pkg).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	for _, d := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("%s imports %s itself (forbidden: %s)", pkg, d, f)
			}
		}
	}
}

func TestLayering(t *testing.T) {
	t.Parallel()
	outer := []string{mod + "/node", mod + "/raftstore", mod + "/cluster", mod + "/server",
		mod + "/daemon", mod + "/client", mod + "/backup", mod + "/api", mod + "/cmd"}
	// Test libraries: nothing that ships may link them. (The standard
	// "testing" package is on the client's list below only: hashicorp/raft
	// links it into every program that runs a node.)
	testLibs := []string{"pgregory.net/rapid", "go.uber.org/goleak",
		"github.com/anishathalye/porcupine", mod + "/testkit"}

	t.Run("state is pure", func(t *testing.T) {
		t.Parallel()
		forbid(t, []string{mod + "/state"}, append(append([]string{"net", "net/http", "os/exec",
			"github.com/hashicorp", "connectrpc.com", "github.com/prometheus"}, outer...), testLibs...)...)
	})
	t.Run("server serves a fence.Service, not a node", func(t *testing.T) {
		t.Parallel()
		// server speaks the cluster's vocabulary (cluster/clusterapi), not
		// package cluster, which is built on a node: nothing of raft is
		// linked into the server.
		forbid(t, []string{mod + "/server"}, append([]string{mod + "/daemon", mod + "/node", mod + "/raftstore",
			mod + "/backup", "github.com/hashicorp"}, testLibs...)...)
		for _, d := range deps(t, mod+"/server") {
			if d == mod+"/cluster" {
				t.Errorf("server imports %s (its vocabulary is cluster/clusterapi)", d)
			}
		}
	})
	t.Run("the server's fake store is the state machine alone", func(t *testing.T) {
		t.Parallel()
		// testkit/memservice stands in for a node in the server's handler
		// tests: no raft, no node, nothing of the wire.
		forbid(t, []string{mod + "/testkit/memservice"}, mod+"/node", mod+"/raftstore", mod+"/cluster",
			mod+"/server", mod+"/daemon", mod+"/api", "github.com/hashicorp", "connectrpc.com", "net/http")
	})
	t.Run("cluster speaks domain types", func(t *testing.T) {
		t.Parallel()
		forbid(t, []string{mod + "/cluster/clusterapi"}, mod+"/node", mod+"/raftstore", "github.com/hashicorp", mod+"/api")
		forbid(t, []string{mod + "/cluster"}, append([]string{mod + "/api", mod + "/server", mod + "/daemon"}, testLibs...)...)
	})
	t.Run("node knows nothing of the wire", func(t *testing.T) {
		t.Parallel()
		forbid(t, []string{mod + "/node"}, append([]string{mod + "/api", mod + "/server", mod + "/daemon",
			mod + "/client", mod + "/cluster", "connectrpc.com"}, testLibs...)...)
	})
	t.Run("client and guards stay small", func(t *testing.T) {
		t.Parallel()
		forbid(t, []string{mod + "/client", mod + "/guard/postgres", mod + "/guard/mysql",
			mod + "/guard/sqlite", mod + "/guard/redis", mod + "/guard/httpguard"},
			append([]string{"testing", "github.com/hashicorp", "github.com/prometheus", mod + "/node",
				mod + "/raftstore", mod + "/server", mod + "/daemon", mod + "/cluster", mod + "/state"}, testLibs...)...)
	})
	t.Run("internal holds production leaves only", func(t *testing.T) {
		t.Parallel()
		out, err := exec.Command("go", "list", mod+"/internal/...").Output()
		if err != nil {
			t.Fatalf("go list internal/...: %v", err)
		}
		for _, p := range strings.Fields(string(out)) {
			for _, d := range deps(t, p) {
				for _, f := range testLibs {
					if d == f || strings.HasPrefix(d, f+"/") {
						t.Errorf("%s (under internal/) imports the test library %s", p, d)
					}
				}
			}
		}
	})
	t.Run("the daemon links no test library", func(t *testing.T) {
		t.Parallel()
		forbid(t, []string{mod + "/cmd/fence"}, testLibs...)
	})
}
