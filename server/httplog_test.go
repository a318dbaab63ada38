package server

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// The HTTP server's own error lines (HTTP/2's "timeout waiting for PING
// response" names no peer) at least name their component.
func TestHTTPErrorLogNamesItsComponent(t *testing.T) {
	var buf bytes.Buffer
	httpErrorLog(slog.New(slog.NewTextHandler(&buf, nil))).Print("http2: timeout waiting for PING response")
	line := buf.String()
	for _, want := range []string{"level=WARN", "component=http", "timeout waiting for PING response"} {
		if !strings.Contains(line, want) {
			t.Fatalf("log line %q lacks %q", line, want)
		}
	}
}
