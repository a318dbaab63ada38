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

	"github.com/fenceworks/fence"
)

func openKind(dir, kind string) (*Node, error) {
	return Open(Config{DataDir: dir, LogStore: kind, LockTimeout: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// A new dir gets the WAL; reopening it without naming a kind finds it again,
// with its tokens (G1).
func TestNewDirUsesWAL(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	mustApply(t, n, acquire("a", time.Hour))
	n.Close()
	if _, err := os.Stat(filepath.Join(dir, walDirName)); err != nil {
		t.Fatalf("no wal dir after first open: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, boltFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a new dir got %s (err %v); want only the wal", boltFileName, err)
	}
	n = openNode(t, dir)
	if got := mustApply(t, n, acquire("b", time.Hour)).Lease.Token; got != 2 {
		t.Fatalf("token after reopen = %d, want 2", got)
	}
}

// A bolt dir keeps working with bolt when no kind is named, with its tokens.
func TestBoltDirReopensWithBolt(t *testing.T) {
	dir := t.TempDir()
	n, err := openKind(dir, LogStoreBolt)
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, n, acquire("a", time.Hour))
	n.Close()
	n, err = openKind(dir, "")
	if err != nil {
		t.Fatalf("reopen bolt dir: %v", err)
	}
	defer n.Close()
	if n.store.kind != LogStoreBolt {
		t.Fatalf("reopened bolt dir with %q", n.store.kind)
	}
	if got := mustApply(t, n, acquire("b", time.Hour)).Lease.Token; got != 2 {
		t.Fatalf("token after reopen = %d, want 2", got)
	}
	if _, err := os.Stat(filepath.Join(dir, walDirName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a bolt dir got a wal dir (err %v)", err)
	}
}

// Naming the other kind than the dir holds is refused clearly: logs are not
// migrated, and a second log next to the first would fork the history.
func TestLogStoreMismatchRefused(t *testing.T) {
	for _, tc := range []struct{ have, want string }{{LogStoreBolt, LogStoreWAL}, {LogStoreWAL, LogStoreBolt}} {
		dir := t.TempDir()
		n, err := openKind(dir, tc.have)
		if err != nil {
			t.Fatal(err)
		}
		n.Close()
		_, err = openKind(dir, tc.want)
		if err == nil || !strings.Contains(err.Error(), "not migrated") {
			t.Fatalf("open %s dir as %s = %v, want a 'not migrated' refusal", tc.have, tc.want, err)
		}
	}
}

func TestLogStoreBothKindsRefused(t *testing.T) {
	dir := t.TempDir()
	n, err := openKind(dir, LogStoreBolt)
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	if err := os.Mkdir(filepath.Join(dir, walDirName), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := openKind(dir, ""); err == nil || !strings.Contains(err.Error(), "holds both") {
		t.Fatalf("open dir with both logs = %v, want a 'holds both' refusal", err)
	}
}

func TestLogStoreUnknownKindInvalid(t *testing.T) {
	_, err := openKind(t.TempDir(), "rocks")
	var inv *fence.InvalidError
	if !errors.As(err, &inv) || !errors.Is(err, fence.ErrInvalid) || !strings.Contains(err.Error(), "log_store") {
		t.Fatalf("open with log store %q = %v, want an invalid-argument error naming log_store", "rocks", err)
	}
}

// The dir lock holds for both kinds, and is released by Close.
func TestSecondOpenFailsForEachKind(t *testing.T) {
	for _, kind := range []string{LogStoreWAL, LogStoreBolt} {
		dir := t.TempDir()
		n, err := openKind(dir, kind)
		if err != nil {
			t.Fatal(err)
		}
		_, err = openKind(dir, "")
		if !errors.Is(err, ErrDirLocked) || !strings.Contains(err.Error(), "locked by another process") {
			t.Fatalf("%s: second open = %v, want ErrDirLocked", kind, err)
		}
		n.Close()
		n, err = openKind(dir, "")
		if err != nil {
			t.Fatalf("%s: open after Close: %v", kind, err)
		}
		n.Close()
	}
}
