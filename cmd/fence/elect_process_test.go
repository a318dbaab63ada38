//go:build e2e

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fenceworks/fence/testkit/testutil"
)

// fence elect with real processes: A leads and runs its command with the
// leader's token; B campaigns and waits; an observer prints A with its
// value; A is stopped (SIGTERM: its child ends, it resigns) and B leads
// with a larger token, which the observer prints next; B's child sees its
// token in FENCE_TOKEN.
func TestProcessElect(t *testing.T) {
	srv := startServe(t)
	// --timeout 1ms: neither observing nor campaigning ends with the
	// global timeout (both run until interrupted; an outside test saw
	// --observe quit after the default 10s).
	obs := exec.Command(fenceBin, "--json", "--timeout", "1ms", "elect", "db-primary", "--observe")
	obs.Env = append(os.Environ(), "FENCE_SERVER="+srv.url)
	out := &testutil.Buffer{}
	obs.Stdout, obs.Stderr = out, out
	if err := obs.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { obs.Process.Kill(); obs.Wait() })
	type leader struct {
		Leader bool
		Token  uint64
		Owner  string
		Value  string
	}
	// seen waits until the observer printed a line for which ok holds.
	seen := func(what string, ok func(leader) bool) leader {
		t.Helper()
		giveUp := time.After(procLimit)
		for {
			for _, line := range strings.Split(out.String(), "\n") {
				var l leader
				if json.Unmarshal([]byte(line), &l) == nil && ok(l) {
					return l
				}
			}
			select {
			case <-giveUp:
				t.Fatalf("observer never printed %s: %s", what, out.String())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	seen("no leader", func(l leader) bool { return !l.Leader })

	a, aExited, aOut, _ := startRun(t, srv.url, "elect", "db-primary", "--ttl", "2s", "--owner", "A", "--value", "10.0.0.1:5432", "--",
		"sh", "-c", `echo "started token=$FENCE_TOKEN"; `+trapChild)
	tokA := tokenOf(t, aOut.String())
	la := seen("A leading", func(l leader) bool { return l.Leader && l.Owner == "A" && l.Value == "10.0.0.1:5432" })
	if la.Token != tokA {
		t.Fatalf("observer saw A's token %d, A's child %d", la.Token, tokA)
	}
	_, _, bOut, _ := startRunNoWait(t, srv.url, "--timeout", "1ms", "elect", "db-primary", "--ttl", "2s", "--owner", "B", "--value", "10.0.0.2:5432", "--",
		"sh", "-c", `echo "started token=$FENCE_TOKEN"; `+trapChild)
	a.Process.Signal(syscall.SIGTERM)
	waitExited(t, aExited, "fence elect A")
	lb := seen("B leading", func(l leader) bool { return l.Leader && l.Owner == "B" && l.Value == "10.0.0.2:5432" })
	if lb.Token <= tokA {
		t.Fatalf("B leads with token %d, not above A's %d", lb.Token, tokA)
	}
	giveUp := time.After(procLimit)
	for !strings.Contains(bOut.String(), "started") {
		select {
		case <-giveUp:
			t.Fatalf("B's child never started: %s", bOut.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if tokenOf(t, bOut.String()) != lb.Token {
		t.Fatalf("B's child token %q, observed %d", bOut.String(), lb.Token)
	}
}
