package node

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence/state"
	"github.com/fenceworks/fence/testkit/testutil"
)

// A snapshot a killed process left unfinished (raft's snapshots/NAME.tmp,
// renamed to NAME only once whole) is removed at the next Open and its
// removal logged; raft only warned and kept them, so crashes during
// snapshots grew the disk without bound (outside attack). The node starts
// with its state and serves.
func TestUnfinishedSnapshotRemovedAtOpen(t *testing.T) {
	dir := t.TempDir()
	n, err := Open(Config{DataDir: dir, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, n, state.Command{Op: state.OpAcquire, Name: "l", Owner: "o", TTL: time.Hour, RequestID: "r1"})
	token := n.LastToken()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "snapshots", "1-2-3.tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"meta.json": `{"ID":"1-2-3"}`, "state.bin": strings.Repeat("x", 4096)} {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var buf testutil.Buffer
	n, err = Open(Config{DataDir: dir, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("the unfinished snapshot %s is still there after Open (stat: %v)", tmp, err)
	}
	if log := buf.String(); !strings.Contains(log, "removed an unfinished snapshot") || !strings.Contains(log, "name=1-2-3.tmp") || !strings.Contains(log, "bytes=") {
		t.Fatalf("Open's log does not name the removed snapshot:\n%s", log)
	}
	if got := n.LastToken(); got != token {
		t.Fatalf("after the reopen the last token is %d, want %d", got, token)
	}
	mustApply(t, n, state.Command{Op: state.OpAcquire, Name: "m", Owner: "o", TTL: time.Hour, RequestID: "r2"})
	if n.LastToken() <= token {
		t.Fatalf("an acquire after the reopen gave token %d, want above %d", n.LastToken(), token)
	}
}
