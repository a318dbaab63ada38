//go:build e2e

package system_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence/testkit/harness"
)

// The third outside attack, with the real binary: a member of a running
// cluster (it joined with --join) is killed and loses its wal/ — its raft
// log and its term and votes — and is started again under its old id and
// addresses. Every start mode is refused at once, before it answers
// anyone, with the error that names MEMBER and says what to do (remove the
// member, start it with an empty dir and --join): --join (the attack's
// first step: the leader that still listed it replicated to it, which wrote
// a term, and a later --peers start was accepted — a voter that forgot its
// votes), --peers, --bootstrap, and no flag (a restart; it would sit
// refusing the leader's RPCs). The cluster goes on granting above its last
// token.
func TestClusterMemberThatLostItsWALIsRefused(t *testing.T) {
	dir := t.TempDir()
	bin := fenceBinary(t)
	start := func(id string, args ...string) *harness.Server {
		return harness.StartT(t, harness.Config{Bin: bin, ID: id, DataDir: filepath.Join(dir, id), RaftAddr: "auto",
			Args: args, ReadyTimeout: hangGuard, StopTimeout: hangGuard})
	}
	n1 := start("n1", "--bootstrap")
	n2 := start("n2", "--join", n1.URL())
	n3 := start("n3", "--join", n1.URL())
	a := restoreAPI(n1.URL())
	last := grantLock(t, a, "before")
	if err := n3.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(n3.DataDir(), "wal")); err != nil {
		t.Fatal(err)
	}
	peers := "n1=" + n1.RaftAddr() + ",n2=" + n2.RaftAddr() + ",n3=" + n3.RaftAddr()
	for _, mode := range [][]string{{"--join", n1.URL()}, {"--peers", peers}, {"--bootstrap"}, nil} {
		cfg := n3.Config()
		cfg.Args, cfg.NoWait = mode, true
		s := harness.StartT(t, cfg)
		select {
		case <-s.Done():
		case <-time.After(hangGuard):
			t.Fatalf("n3 without its wal/, started with %v, still runs:\n%s", mode, s.LogTail(4000))
		}
		out := s.LastLog()
		if st := s.ExitState(); st == nil || st.Success() || !strings.Contains(out, "has been a cluster member") || !strings.Contains(out, "fence members remove n3") {
			t.Fatalf("n3 without its wal/, started with %v: exit %v, want refused naming MEMBER and the way out:\n%s", mode, st, out)
		}
	}
	if next := grantLock(t, a, "after"); next <= last {
		t.Fatalf("token %d after the refusals, want above %d", next, last)
	}
	if m, err := n1.MembersOf(t.Context()); err != nil || len(m.GetMembers()) != 3 {
		t.Fatalf("members: %v, %v", m, err)
	}
}
