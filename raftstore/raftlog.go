package raftstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// NewHCLogger routes raft's hclog output into slog (warnings and errors
// only: raft is chatty at info): each hclog call is one slog record at the
// matching level (an hclog error is an slog error, so --log-level error
// still shows it), its message as the record's message and its key/value
// pairs as attributes, with component=raft (raft.wal for Named("wal")).
// The line is then in the process's log format, text or JSON.
//
// Some of raft's messages are re-levelled to what an operator must do
// about them (relevel):
//   - the per-RPC failures to one peer (failed to heartbeat to, failed to
//     appendEntries to, failed to make requestVote RPC, …: about 3 a second
//     while a peer is down) are DEBUG; the first of an outage logs one
//     `raft peer unreachable` WARN naming the peer, and its return one
//     `raft peer reachable again` INFO with how long it was gone (peerlog.go;
//     the return is seen only by a logger made by Mux.RaftLogger, whose
//     transport reads the peer's answers);
//   - `failed to contact` (the leader's lease check, per peer) is DEBUG;
//   - restoring a snapshot at start is two INFO lines, the second with its
//     duration; raft's progress lines are DEBUG;
//   - with SingleVoter, the election a single node starts because it heard
//     from no leader since it started (every start: there is none) is INFO.
func NewHCLogger(l *slog.Logger, opts ...HCLoggerOption) hclog.Logger {
	return newHCLogger(l, newPeerLog(), opts)
}

// HCLoggerOption adjusts NewHCLogger.
type HCLoggerOption func(*hcShared)

// SingleVoter says the node is its cluster's only voter: the election it
// starts with no leader known (on every start) is expected, logged at INFO.
func SingleVoter() HCLoggerOption { return func(s *hcShared) { s.single = true } }

// RaftLogger is NewHCLogger for the raft node that uses this mux: its
// peer tracking is the mux's, so a peer logged unreachable is logged
// reachable again when this mux's transport reads its answer.
func (m *Mux) RaftLogger(l *slog.Logger, opts ...HCLoggerOption) hclog.Logger {
	return newHCLogger(l, m.peers, opts)
}

func newHCLogger(l *slog.Logger, peers *peerLog, opts []HCLoggerOption) hclog.Logger {
	lv := new(atomic.Int32)
	lv.Store(int32(hclog.Warn))
	sh := &hcShared{peers: peers, restores: map[any]time.Time{}}
	for _, o := range opts {
		o(sh)
	}
	return &hcSlog{l: l, name: "raft", level: lv, shared: sh}
}

// hcSlog is an hclog.Logger writing to an slog.Logger.
type hcSlog struct {
	l       *slog.Logger
	name    string
	implied []any
	level   *atomic.Int32 // hclog.Level; shared by the loggers With and Named derive
	shared  *hcShared     // shared by the loggers With and Named derive
}

// hcShared is the state of the re-levelling, shared by derived loggers.
type hcShared struct {
	peers  *peerLog
	single bool

	mu       sync.Mutex
	restores map[any]time.Time // snapshot id -> start of its restore
}

// peerFailures are raft's messages for one failed RPC to one peer, and the
// key naming the peer (hashicorp/raft v1.7 replication.go, raft.go).
var peerFailures = map[string]string{
	"failed to heartbeat to":                  "peer",   // raft.ServerAddress
	"failed to appendEntries to":              "peer",   // raft.Server
	"failed to pipeline appendEntries":        "peer",   // raft.Server
	"failed to start pipeline replication to": "peer",   // raft.Server
	"failed to send snapshot to":              "peer",   // raft.Server
	"failed to install snapshot":              "peer",   // raft.ServerID (the leader's; a follower's own has no peer)
	"failed to make requestVote RPC":          "target", // raft.Server
}

// slogLevel maps an hclog level to slog's.
func slogLevel(l hclog.Level) slog.Level {
	switch {
	case l >= hclog.Error:
		return slog.LevelError
	case l == hclog.Warn:
		return slog.LevelWarn
	case l == hclog.Info:
		return slog.LevelInfo
	}
	return slog.LevelDebug // trace, debug
}

func (h *hcSlog) enabled(l hclog.Level) bool {
	return l != hclog.Off && l >= hclog.Level(h.level.Load()) && h.l.Enabled(context.Background(), slogLevel(l))
}

// arg is the value of key among the implied args and args (the last one).
func arg(key string, lists ...[]any) (any, bool) {
	var v any
	found := false
	for _, l := range lists {
		for i := 0; i+1 < len(l); i += 2 {
			if k, ok := l[i].(string); ok && k == key {
				v, found = l[i+1], true
			}
		}
	}
	return v, found
}

// relevel decides the level of raft's message (see NewHCLogger) and extra
// attributes for it; it logs the peer lines itself. ok: decided here, so
// shown whenever the slog handler shows that level (raft's warnings
// re-levelled to DEBUG are seen at --log-level debug); otherwise the
// message's own level applies.
func (h *hcSlog) relevel(level hclog.Level, msg string, args []any) (lv slog.Level, extra []any, ok bool) {
	if key, isPeer := peerFailures[msg]; isPeer && level >= hclog.Warn {
		if v, found := arg(key, h.implied, args); found {
			if addr, id, known := h.shared.peers.peerOf(v); known {
				errv, _ := arg("error", h.implied, args)
				h.shared.peers.fail(h.l, h.name, addr, id, msg, errv)
				return slog.LevelDebug, nil, true
			}
		}
		return 0, nil, false
	}
	switch msg {
	case "failed to contact":
		return slog.LevelDebug, nil, true
	case "heartbeat timeout reached, starting election":
		if id, _ := arg("last-leader-id", h.implied, args); h.shared.single && fmt.Sprint(id) == "" {
			return slog.LevelInfo, []any{"expected", "a single voter elects itself on every start"}, true
		}
	case "starting restore from snapshot":
		id, _ := arg("id", h.implied, args)
		h.shared.mu.Lock()
		h.shared.restores[id] = time.Now()
		h.shared.mu.Unlock()
		return slog.LevelInfo, nil, true
	case "restored from snapshot":
		id, _ := arg("id", h.implied, args)
		h.shared.mu.Lock()
		start, started := h.shared.restores[id]
		delete(h.shared.restores, id)
		h.shared.mu.Unlock()
		if started {
			return slog.LevelInfo, []any{"duration", time.Since(start).Round(time.Millisecond)}, true
		}
		return slog.LevelInfo, nil, true
	}
	return 0, nil, false
}

func (h *hcSlog) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	slevel, extra, decided := h.relevel(level, msg, args)
	if decided {
		if level == hclog.Off || !h.l.Enabled(context.Background(), slevel) {
			return
		}
	} else {
		if !h.enabled(level) {
			return
		}
		slevel = slogLevel(level)
	}
	attrs := make([]any, 0, 2+len(h.implied)+len(args)+len(extra))
	attrs = append(attrs, "component", h.name)
	attrs = append(attrs, h.implied...)
	attrs = append(attrs, args...)
	attrs = append(attrs, extra...)
	h.l.Log(context.Background(), slevel, msg, attrs...)
}

func (h *hcSlog) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hcSlog) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hcSlog) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hcSlog) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hcSlog) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hcSlog) IsTrace() bool { return h.enabled(hclog.Trace) }
func (h *hcSlog) IsDebug() bool { return h.enabled(hclog.Debug) }
func (h *hcSlog) IsInfo() bool  { return h.enabled(hclog.Info) }
func (h *hcSlog) IsWarn() bool  { return h.enabled(hclog.Warn) }
func (h *hcSlog) IsError() bool { return h.enabled(hclog.Error) }

func (h *hcSlog) ImpliedArgs() []any { return h.implied }

func (h *hcSlog) With(args ...any) hclog.Logger {
	c := *h
	c.implied = append(append([]any(nil), h.implied...), args...)
	return &c
}

func (h *hcSlog) Name() string { return h.name }

func (h *hcSlog) Named(name string) hclog.Logger {
	c := *h
	if c.name != "" {
		name = c.name + "." + name
	}
	c.name = name
	return &c
}

func (h *hcSlog) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = name
	return &c
}

func (h *hcSlog) SetLevel(level hclog.Level) { h.level.Store(int32(level)) }
func (h *hcSlog) GetLevel() hclog.Level      { return hclog.Level(h.level.Load()) }

func (h *hcSlog) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

// StandardWriter: each line written is one record; its level is read from
// an hclog-style "[WARN]" prefix (or opts.ForceLevel), else info.
func (h *hcSlog) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	var force hclog.Level
	if opts != nil {
		force = opts.ForceLevel
	}
	return stdWriter{h, force}
}

type stdWriter struct {
	h     *hcSlog
	force hclog.Level
}

func (w stdWriter) Write(p []byte) (int, error) {
	for line := range bytes.Lines(p) {
		s := strings.TrimSpace(string(line))
		if s == "" {
			continue
		}
		level := w.force
		if level == hclog.NoLevel {
			level = hclog.Info
			for _, x := range []struct {
				prefix string
				l      hclog.Level
			}{{"[TRACE]", hclog.Trace}, {"[DEBUG]", hclog.Debug}, {"[INFO]", hclog.Info}, {"[WARN]", hclog.Warn}, {"[ERR]", hclog.Error}, {"[ERROR]", hclog.Error}} {
				if strings.HasPrefix(s, x.prefix) {
					level, s = x.l, strings.TrimSpace(s[len(x.prefix):])
					break
				}
			}
		}
		w.h.Log(level, s)
	}
	return len(p), nil
}
