package client

import (
	"net/http"
	"testing"
	"time"
)

// TestServiceTransportPingsSilentConnections: the Service's own HTTP/2
// transport pings a connection after 2s without a frame and closes it when
// the ping is not answered within 2s (NewService's comment), so a silent
// leader costs a forwarded call about 4s, not Go's default 15s ping timeout
// or no detection at all. A behaviour test (TestServiceSilentConnection-
// FailsUnavailable) shows the detection works; telling 4s from 17s there
// would need a timing threshold, so the values are pinned here.
//
// Kills both arithmetic mutants of service.go's HTTP2Config
// (2 / time.Second = 0 for SendPingTimeout or PingTimeout).
func TestServiceTransportPingsSilentConnections(t *testing.T) {
	s := NewService("http://127.0.0.1:1").(*Service)
	tr, ok := s.hc.Transport.(*http.Transport)
	if !ok || tr.HTTP2 == nil {
		t.Fatalf("Service transport %T without an HTTP2Config", s.hc.Transport)
	}
	if got := tr.HTTP2.SendPingTimeout; got != 2*time.Second {
		t.Fatalf("SendPingTimeout %v, want 2s", got)
	}
	if got := tr.HTTP2.PingTimeout; got != 2*time.Second {
		t.Fatalf("PingTimeout %v, want 2s", got)
	}
}
