package raftstore

import (
	"bufio"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/fenceworks/fence/testkit/testutil"
)

func records(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not JSON: %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// raft's hclog calls become slog records: the level maps (an error stays
// an error), the message is raft's message alone, its key/value pairs are
// attributes, the component names the logger; below warn nothing is
// logged (raft is chatty at info), nor below the slog handler's level.
func TestHCLoggerToSlog(t *testing.T) {
	var buf testutil.Buffer
	h := NewHCLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	h.Info("chatty", "k", 1)
	h.Debug("chattier")
	h.Warn("heartbeat timeout reached, starting election", "last-leader-id", "n1")
	h.Named("wal").With("segment", 7).Error("failed to append", "error", errors.New("disk full"))
	h.StandardLogger(nil).Print("[ERR] from a standard logger")
	got := records(t, buf.String())
	want := []map[string]any{
		{"level": "WARN", "msg": "heartbeat timeout reached, starting election", "component": "raft", "last-leader-id": "n1"},
		{"level": "ERROR", "msg": "failed to append", "component": "raft.wal", "segment": float64(7), "error": "disk full"},
		{"level": "ERROR", "msg": "from a standard logger", "component": "raft"},
	}
	if len(got) != len(want) {
		t.Fatalf("records %v, want %d", got, len(want))
	}
	for i, w := range want {
		for k, v := range w {
			if got[i][k] != v {
				t.Errorf("record %d: %s = %v, want %v (%v)", i, k, got[i][k], v, got[i])
			}
		}
	}
	if !h.IsWarn() || h.IsInfo() {
		t.Error("IsWarn/IsInfo: want warn on, info off")
	}
	// A handler at error: raft's warnings are dropped, its errors kept.
	buf = testutil.Buffer{}
	h = NewHCLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelError})))
	h.Warn("w")
	h.Log(hclog.Error, "e")
	if got := records(t, buf.String()); len(got) != 1 || got[0]["msg"] != "e" {
		t.Errorf("at error level: %v, want only the error", got)
	}
}
