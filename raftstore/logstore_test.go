package raftstore

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openKind(dir, kind string) (*Store, error) {
	return Open(Config{Dir: dir, Kind: kind, LockTimeout: 50 * time.Millisecond, Logger: quietLogger()})
}

// A new dir gets the WAL; reopening it without naming a kind finds it
// again, with its entries. (node's TestNewDirUsesWAL checks the tokens.)
func TestStoreNewDirUsesWAL(t *testing.T) {
	dir := t.TempDir()
	s, err := openKind(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind != LogStoreWAL {
		t.Fatalf("new dir opened as %q, want %q", s.Kind, LogStoreWAL)
	}
	if err := s.Log.StoreLog(&raft.Log{Index: 1, Term: 1, Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if s.Syncs() == 0 {
		t.Error("a WAL append was acknowledged with no fsync counted")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, boltFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a new dir got %s (err %v); want only the wal", boltFileName, err)
	}
	s, err = openKind(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if last, err := s.Log.LastIndex(); s.Kind != LogStoreWAL || err != nil || last != 1 {
		t.Fatalf("reopen: kind %q, last index %d (%v); want wal, 1", s.Kind, last, err)
	}
}

// A dir holding a raft-boltdb log is refused clearly, whatever kind is
// asked for: logs are not migrated, and a second log next to the first
// would fork the history.
func TestBoltDirRefused(t *testing.T) {
	for _, kind := range []string{"", LogStoreWAL} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, boltFileName), []byte("bolt"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := openKind(dir, kind)
		if err == nil || !strings.Contains(err.Error(), "not migrated") || !strings.Contains(err.Error(), "raft-boltdb") {
			t.Fatalf("open a dir holding %s as %q = %v, want a 'not migrated' refusal", boltFileName, kind, err)
		}
		if _, err := os.Stat(filepath.Join(dir, walDirName)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a refused dir got a %s/ (err %v)", walDirName, err)
		}
	}
}

func TestLogStoreUnknownKindInvalid(t *testing.T) {
	for _, kind := range []string{"rocks", "bolt"} {
		_, err := openKind(t.TempDir(), kind)
		var inv *fence.InvalidError
		if !errors.As(err, &inv) || !errors.Is(err, fence.ErrInvalid) || !strings.Contains(err.Error(), "log_store") {
			t.Fatalf("open with log store %q = %v, want an invalid-argument error naming log_store", kind, err)
		}
	}
}

// The dir lock holds, and is released by Close (also on a second Close,
// which returns the first result).
func TestStoreSecondOpenFails(t *testing.T) {
	for _, kind := range []string{LogStoreWAL} {
		dir := t.TempDir()
		s, err := openKind(dir, kind)
		if err != nil {
			t.Fatal(err)
		}
		_, err = openKind(dir, "")
		if !errors.Is(err, ErrDirLocked) || !strings.Contains(err.Error(), "locked by another process") {
			t.Fatalf("%s: second open = %v, want ErrDirLocked", kind, err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("%s: close: %v", kind, err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("%s: second close: %v", kind, err)
		}
		s, err = openKind(dir, "")
		if err != nil {
			t.Fatalf("%s: open after Close: %v", kind, err)
		}
		if s.Kind != kind {
			t.Fatalf("reopened a %s dir as %q", kind, s.Kind)
		}
		s.Close()
	}
}
