package raftstore

import (
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// NewHCLogger routes raft's hclog output (warnings and errors only: raft is
// chatty at info) into slog.
func NewHCLogger(l *slog.Logger) hclog.Logger {
	std := slog.NewLogLogger(l.With("component", "raft").Handler(), slog.LevelWarn)
	return hclog.FromStandardLogger(std, &hclog.LoggerOptions{
		Name:            "raft",
		Level:           hclog.Warn,
		DisableTime:     true,
		IncludeLocation: false,
	})
}
