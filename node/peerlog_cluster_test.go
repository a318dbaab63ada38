package node

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// recLog is an slog.Handler that keeps every record (all levels).
type recLog struct {
	mu   sync.Mutex
	recs []rec
}

type rec struct {
	level slog.Level
	msg   string
	attrs map[string]slog.Value
}

type recHandler struct {
	log   *recLog
	attrs []slog.Attr
}

func (h recHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recHandler) WithGroup(string) slog.Handler            { return h }
func (h recHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return recHandler{h.log, append(append([]slog.Attr(nil), h.attrs...), as...)}
}
func (h recHandler) Handle(_ context.Context, r slog.Record) error {
	m := map[string]slog.Value{}
	for _, a := range h.attrs {
		m[a.Key] = a.Value.Resolve()
	}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.Resolve(); return true })
	h.log.mu.Lock()
	h.log.recs = append(h.log.recs, rec{r.Level, r.Message, m})
	h.log.mu.Unlock()
	return nil
}

func (l *recLog) snapshot() []rec {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]rec(nil), l.recs...)
}

// until waits until cond holds for the records (a hang guard, not a timing
// assertion) and returns them.
func (l *recLog) until(t *testing.T, what string, cond func([]rec) bool) []rec {
	t.Helper()
	deadline := time.Now().Add(clusterWait)
	for {
		rs := l.snapshot()
		if cond(rs) {
			return rs
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, clusterWait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A real 3-node cluster: a follower is killed (its raft transport closed,
// so every RPC to it fails) and started again. The leader logs one
// `raft peer unreachable` WARN naming it, raft's per-RPC failures to it
// (about 3 heartbeats a second) at DEBUG and none at ERROR, and one `raft
// peer reachable again` INFO with how long it was gone once the restarted
// node answers. Orderings and counts of records, no durations.
// Planted: the dedup off (peerLog.fail logging the WARN on every failure) —
// caught (several WARNs before the return); the return hook off
// (trackedConn.Read not calling reached) — caught (no INFO).
func TestClusterPeerOutageLogsOneWarnAndOneReturn(t *testing.T) {
	var mu sync.Mutex
	logs := map[string]*recLog{}
	tc := startCluster(t, clusterOpts{n: 3, tweak: func(c *Config) {
		l := &recLog{}
		mu.Lock()
		logs[c.NodeID] = l
		mu.Unlock()
		c.Logger = slog.New(recHandler{log: l})
	}})
	lead := tc.leader()
	f := tc.others(lead)[0]
	addr := f.mux.Addr()
	names := func(r rec) bool {
		return r.attrs["peer_id"].String() == f.id && r.attrs["peer_addr"].String() == addr
	}
	isWarn := func(r rec) bool {
		return r.level == slog.LevelWarn && strings.HasPrefix(r.msg, "raft peer unreachable") && names(r)
	}
	isBack := func(r rec) bool { return r.level == slog.LevelInfo && r.msg == "raft peer reachable again" && names(r) }
	isRPCFailure := func(r rec) bool {
		_, ok := map[string]bool{"failed to heartbeat to": true, "failed to appendEntries to": true}[r.msg]
		return ok && strings.Contains(r.attrs["peer"].String(), addr)
	}
	ll := logs[lead.id]

	tc.kill(f)
	// The outage is seen, and raft went on failing heartbeats to it.
	ll.until(t, "heartbeats failing 3 times after the WARN", func(rs []rec) bool {
		n, warned := 0, false
		for _, r := range rs {
			warned = warned || isWarn(r)
			if warned && isRPCFailure(r) {
				n++
			}
		}
		return n >= 3
	})
	tc.open(f)
	rs := ll.until(t, "`raft peer reachable again` for "+f.id, func(rs []rec) bool {
		for _, r := range rs {
			if isBack(r) {
				return true
			}
		}
		return false
	})

	warns, failures := 0, 0
	for _, r := range rs {
		if r.level >= slog.LevelError && r.attrs["component"].String() == "raft" {
			t.Errorf("raft ERROR on the leader: %s %v", r.msg, r.attrs)
		}
		if isRPCFailure(r) && r.level != slog.LevelDebug {
			t.Errorf("a per-RPC failure at %v, want DEBUG: %s %v", r.level, r.msg, r.attrs)
		}
		switch {
		case isWarn(r):
			warns++
		case isRPCFailure(r):
			failures++
		case isBack(r):
			if warns != 1 {
				t.Errorf("%d `raft peer unreachable` WARNs for %s before its return, want 1", warns, f.id)
			}
			if d := r.attrs["down_for"]; d.Kind() != slog.KindDuration || d.Duration() <= 0 {
				t.Errorf("return %v: want a positive down_for", r.attrs)
			}
			if n := r.attrs["failed_rpcs"].Int64(); n < int64(failures) {
				t.Errorf("return counts %d failed RPCs, want at least the %d logged at DEBUG", n, failures)
			}
			return
		}
	}
}
