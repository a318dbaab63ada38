package server

import (
	"log"
	"log/slog"
)

// httpErrorLog is the net/http (and HTTP/2) server's error log: its lines
// are about one client connection (a TLS handshake, a PING a client did not
// answer, a malformed request), so they name their component and come at
// WARN, never ERROR: nothing in the server needs an operator.
func httpErrorLog(l *slog.Logger) *log.Logger {
	return slog.NewLogLogger(l.With("component", "http").Handler(), slog.LevelWarn)
}
