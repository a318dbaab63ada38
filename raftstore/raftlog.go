package raftstore

import (
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// NewHCLogger routes raft's hclog output into slog (warnings and errors
// only: raft is chatty at info): each hclog call is one slog record at the
// matching level (an hclog error is an slog error, so --log-level error
// still shows it), its message as the record's message and its key/value
// pairs as attributes, with component=raft (raft.wal for Named("wal")).
// The line is then in the process's log format, text or JSON.
func NewHCLogger(l *slog.Logger) hclog.Logger {
	lv := new(atomic.Int32)
	lv.Store(int32(hclog.Warn))
	return &hcSlog{l: l, name: "raft", level: lv}
}

// hcSlog is an hclog.Logger writing to an slog.Logger.
type hcSlog struct {
	l       *slog.Logger
	name    string
	implied []any
	level   *atomic.Int32 // hclog.Level; shared by the loggers With and Named derive
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

func (h *hcSlog) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	if !h.enabled(level) {
		return
	}
	attrs := make([]any, 0, 2+len(h.implied)+len(args))
	attrs = append(attrs, "component", h.name)
	attrs = append(attrs, h.implied...)
	attrs = append(attrs, args...)
	h.l.Log(context.Background(), slogLevel(level), msg, attrs...)
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
