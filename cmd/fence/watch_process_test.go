//go:build e2e

package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fence watch --json against a real server: the state first, then a grant
// and a release under the prefix as JSON lines with the grant's token, a
// lock outside the prefix not shown; a resume with --after the grant's
// position starts with the release; SIGINT ends it with status 0.
func TestProcessWatch(t *testing.T) {
	srv := startServe(t)
	w1, exited, out, _ := startRunNoWait(t, srv.url, "--json", "watch", "jobs/")
	type event struct {
		Position string
		State    *json.RawMessage
		Change   *struct {
			Kind  string
			Name  string
			Token uint64
		}
	}
	lines := func() []event {
		var evs []event
		for _, l := range strings.Split(out.String(), "\n") {
			var e event
			if json.Unmarshal([]byte(l), &e) == nil && e.Position != "" {
				evs = append(evs, e)
			}
		}
		return evs
	}
	until := func(what string, ok func([]event) bool) []event {
		t.Helper()
		giveUp := time.After(procLimit)
		for {
			if evs := lines(); ok(evs) {
				return evs
			}
			select {
			case <-giveUp:
				t.Fatalf("fence watch never printed %s: %s", what, out.String())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	until("its state", func(evs []event) bool { return len(evs) > 0 && evs[0].State != nil })
	fenceRun(t, srv.url, "acquire", "other/x", "--ttl", "30s").want(t, exitOK, "a lock outside the prefix")
	tok := tokenOf(t, fenceRun(t, srv.url, "acquire", "jobs/a", "--ttl", "30s").want(t, exitOK, "acquire jobs/a").stdout)
	fenceRun(t, srv.url, "release", "jobs/a", "--token", fmt.Sprint(tok)).want(t, exitOK, "release jobs/a")
	evs := until("the grant and the release", func(evs []event) bool { return len(evs) >= 3 })
	g, r := evs[1].Change, evs[2].Change
	if g == nil || g.Kind != "granted" || g.Name != "jobs/a" || g.Token != tok || r == nil || r.Kind != "released" || r.Token != tok {
		t.Fatalf("events after the state: %s", out.String())
	}
	for _, e := range evs {
		if e.Change != nil && !strings.HasPrefix(e.Change.Name, "jobs/") {
			t.Fatalf("a change outside the prefix: %s", out.String())
		}
	}
	// Resume after the grant: the release comes first.
	w2, exited2, out2, _ := startRunNoWait(t, srv.url, "--json", "watch", "jobs/", "--after", evs[1].Position)
	giveUp := time.After(procLimit)
	for !strings.Contains(out2.String(), `"released"`) {
		select {
		case <-giveUp:
			t.Fatalf("fence watch --after %s: %s", evs[1].Position, out2.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	var first event
	if err := json.Unmarshal([]byte(strings.SplitN(out2.String(), "\n", 2)[0]), &first); err != nil || first.Change == nil || first.Change.Kind != "released" {
		t.Fatalf("a resume after the grant began with %q, want the release", strings.SplitN(out2.String(), "\n", 2)[0])
	}
	for _, w := range []struct {
		cmd    *exec.Cmd
		exited <-chan struct{}
		what   string
	}{{w1, exited, "fence watch"}, {w2, exited2, "fence watch --after"}} {
		w.cmd.Process.Signal(syscall.SIGINT)
		waitExited(t, w.exited, w.what)
		if code := w.cmd.ProcessState.ExitCode(); code != exitOK {
			t.Fatalf("%s after SIGINT: exit %d, want 0", w.what, code)
		}
	}
}
