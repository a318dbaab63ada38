package raftstore

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence/testkit/testutil"
)

// A peer's outage, fed as the exact calls hashicorp/raft v1.7.3 makes
// (replication.go, raft.go: the message, the key naming the peer and its
// type): one `raft peer unreachable` WARN naming the peer's id and address
// on the first failure, every per-RPC failure at DEBUG (none at ERROR), and
// one `raft peer reachable again` INFO with down_for and the failed RPCs
// when it is heard from. A failure that names no peer stays an ERROR.
// Planted: the dedup off (fail logging the WARN on every failure) — caught
// (7 WARNs); the re-level off (per-RPC failures at their own level) —
// caught (ERRORs per heartbeat).
func TestRaftPeerOutageLogsOneWarnAndOneReturn(t *testing.T) {
	var buf testutil.Buffer
	m, err := Listen("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	h := m.RaftLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	const addr = "127.0.0.1:7002"
	peer := raft.Server{Suffrage: raft.Voter, ID: "n2", Address: addr}
	refused := errors.New("dial tcp " + addr + ": connect: connection refused")

	h.Error("failed to appendEntries to", "peer", peer, "error", refused)
	for range 5 {
		h.Error("failed to heartbeat to", "peer", raft.ServerAddress(addr), "backoff time", 10*time.Millisecond, "error", refused)
	}
	h.Error("failed to make requestVote RPC", "target", peer, "error", refused, "term", uint64(3))
	h.Warn("failed to contact", "server-id", raft.ServerID("n2"), "time", 500*time.Millisecond)
	h.Error("failed to install snapshot", "error", errors.New("local disk")) // a follower's own: no peer
	m.PeerHeard(addr)
	m.PeerHeard(addr) // back already: nothing more

	var warns, errs, debugs, infos []map[string]any
	for _, r := range records(t, buf.String()) {
		switch r["level"] {
		case "WARN":
			warns = append(warns, r)
		case "ERROR":
			errs = append(errs, r)
		case "DEBUG":
			debugs = append(debugs, r)
		case "INFO":
			infos = append(infos, r)
		}
	}
	if len(warns) != 1 || !strings.HasPrefix(warns[0]["msg"].(string), "raft peer unreachable") ||
		warns[0]["peer_id"] != "n2" || warns[0]["peer_addr"] != addr || warns[0]["component"] != "raft" ||
		warns[0]["failed"] != "failed to appendEntries to" || !strings.Contains(warns[0]["err"].(string), "connection refused") {
		t.Errorf("WARN records %v, want one `raft peer unreachable` naming n2 at %s, the failure and its error", warns, addr)
	}
	if len(errs) != 1 || errs[0]["msg"] != "failed to install snapshot" {
		t.Errorf("ERROR records %v, want only the failure that names no peer", errs)
	}
	if len(debugs) != 8 {
		t.Errorf("%d DEBUG records, want raft's 8 messages (7 failed RPCs, 1 failed to contact): %v", len(debugs), debugs)
	}
	if len(infos) != 1 || infos[0]["msg"] != "raft peer reachable again" || infos[0]["peer_id"] != "n2" ||
		infos[0]["peer_addr"] != addr || infos[0]["failed_rpcs"] != float64(7) {
		t.Fatalf("INFO records %v, want one `raft peer reachable again` naming n2 at %s with failed_rpcs 7", infos, addr)
	}
	if d, ok := infos[0]["down_for"].(float64); !ok || d < 0 { // slog's JSON: nanoseconds
		t.Errorf("down_for %v, want a duration", infos[0]["down_for"])
	}
}

// The election a single voter starts on every start (no leader known) is
// INFO; in a cluster, or with a leader known before, it stays a WARN. A
// snapshot restored at start is two INFO lines, the second with its
// duration; raft's progress line stays hidden.
// Planted: SingleVoter ignored — caught (WARN).
func TestRaftExpectedLinesReleveled(t *testing.T) {
	var buf testutil.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, nil)) // info
	election := func(h interface {
		Warn(string, ...any)
	}, last string) {
		h.Warn("heartbeat timeout reached, starting election", "last-leader-addr", raft.ServerAddress(""), "last-leader-id", raft.ServerID(last))
	}
	election(NewHCLogger(l, SingleVoter()), "")
	election(NewHCLogger(l), "")
	election(NewHCLogger(l, SingleVoter()), "n1")
	snap := NewHCLogger(l).With("id", "2-100-1700000000000", "last-index", uint64(100), "last-term", uint64(2), "size-in-bytes", int64(4096))
	snap.Info("starting restore from snapshot")
	snap.Info("snapshot restore progress", "read-bytes", int64(4096), "percent-complete", "100.00%")
	snap.Info("restored from snapshot")

	got := records(t, buf.String())
	want := []struct{ level, msg string }{
		{"INFO", "heartbeat timeout reached, starting election"},
		{"WARN", "heartbeat timeout reached, starting election"},
		{"WARN", "heartbeat timeout reached, starting election"},
		{"INFO", "starting restore from snapshot"},
		{"INFO", "restored from snapshot"},
	}
	if len(got) != len(want) {
		t.Fatalf("records %v, want %d", got, len(want))
	}
	for i, w := range want {
		if got[i]["level"] != w.level || got[i]["msg"] != w.msg {
			t.Errorf("record %d: %v %v, want %s %s", i, got[i]["level"], got[i]["msg"], w.level, w.msg)
		}
	}
	if got[4]["id"] != "2-100-1700000000000" {
		t.Errorf("restore end %v: want the snapshot's id", got[4])
	}
	if d, ok := got[4]["duration"].(float64); !ok || d < 0 {
		t.Errorf("restore end %v: want a duration", got[4])
	}
}
