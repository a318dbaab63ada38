package node

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence/state"
)

// A data dir that has served (it records its node id) and then lost its
// raft log and snapshots is not bootstrapped again: that would start a new
// store at token 1, below the tokens it granted. Open refuses it with a
// *LostStateError naming the dir and the way out, and a second start
// refuses it alike; removing NODE_ID (the operator's deliberate choice)
// starts a new store. (The outside attack: rm -rf wal/ and the next
// acquire got token 1.)
func TestLostLogIsNotBootstrappedAgain(t *testing.T) {
	dir := t.TempDir()
	n, err := Open(Config{DataDir: dir, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		mustApply(t, n, state.Command{Op: state.OpAcquire, Name: "l" + string(rune('a'+i)), Owner: "o", TTL: time.Minute})
	}
	if got := n.LastToken(); got != 3 {
		t.Fatalf("last token %d, want 3", got)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	for _, lost := range []string{"wal", "snapshots"} {
		if err := os.RemoveAll(filepath.Join(dir, lost)); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		_, err = Open(Config{DataDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		var lost *LostStateError
		if !errors.As(err, &lost) || lost.Dir != dir || !strings.Contains(err.Error(), "fence restore") {
			t.Fatalf("Open of a dir that lost its log: %v, want a *LostStateError naming %s and fence restore", err, dir)
		}
	}
	if err := os.Remove(filepath.Join(dir, nodeIDFile)); err != nil {
		t.Fatal(err)
	}
	n = openNode(t, dir)
	if got := n.LastToken(); got != 0 {
		t.Fatalf("a new store on purpose: last token %d, want 0", got)
	}
}
