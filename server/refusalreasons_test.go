package server

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// Refusals made in front of Connect's handlers — limitBodies' check of an
// announced Content-Length, serveStreams' check of the deadline header —
// and the end of a Connect stream with JSON messages get the reason and
// facts the JSON contract promises (docs/api.md), as a handler's refusal
// does (refusalReasons, jsonerror.go).
func TestRefusalReasonsInFrontOfConnect(t *testing.T) {
	_, url := startServer(t)

	// A unary JSON POST announcing a body over the limit is refused before
	// its body is read: header and body both say INVALID_ARGUMENT, facts
	// name the field and the bound.
	t.Run("contentLengthOverLimit", func(t *testing.T) {
		t.Parallel()
		body := strings.NewReader(`{"resource":"r","value":"` + strings.Repeat("A", maxRequestBytes) + `"}`)
		req, _ := http.NewRequest(http.MethodPost, url+fencev1connect.ResourceServiceWriteProcedure, io.LimitReader(body, maxRequestBytes+1))
		req.Header.Set("Content-Type", "application/json")
		req.ContentLength = maxRequestBytes + 1
		resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := object(t, reply{resp.StatusCode, resp.Header, raw})
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Fence-Reason") != "INVALID_ARGUMENT" ||
			at(m, "reason") != "INVALID_ARGUMENT" || at(m, "facts", "field") != "body" ||
			!strings.Contains(fmt.Sprint(at(m, "facts", "bound")), fmt.Sprint(maxRequestBytes)) {
			t.Fatalf("status %d Fence-Reason %q body %s; want 400, reason INVALID_ARGUMENT in header and body, facts field body and the %d-byte bound",
				resp.StatusCode, resp.Header.Get("Fence-Reason"), raw, maxRequestBytes)
		}
	})

	// SessionService.Stream over connect+json ending in a refusal: the end
	// message's error has reason and facts, and its debug copy numbers.
	t.Run("streamEndJSON", func(t *testing.T) {
		t.Parallel()
		msg := []byte(`{"session":424242,"call":1,"keepAlive":{"ttl":10}}`)
		frame := append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg))), msg...)
		req, _ := http.NewRequest(http.MethodPost, url+fencev1connect.SessionServiceStreamProcedure, bytes.NewReader(frame))
		req.Header.Set("Content-Type", "application/connect+json")
		resp, err := h2cClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var end []byte
		for b := body; len(b) >= 5; {
			n := binary.BigEndian.Uint32(b[1:5])
			if int(n) > len(b)-5 {
				t.Fatalf("stream body %q: a message past the end", body)
			}
			if b[0]&2 != 0 {
				end = b[5 : 5+n]
			}
			b = b[5+n:]
		}
		var m map[string]any
		if err := json.Unmarshal(end, &m); err != nil {
			t.Fatalf("stream body %q: no end message: %v", body, err)
		}
		debug := at(m, "error", "details")
		if at(m, "error", "reason") != "SESSION_EXPIRED" || number(t, m, "error", "facts", "session") != 424242 {
			t.Fatalf("end message %s; want error.reason SESSION_EXPIRED, error.facts.session 424242", end)
		}
		ds, _ := debug.([]any)
		if len(ds) != 1 {
			t.Fatalf("end message %s; want one detail", end)
		}
		if s, ok := at(ds[0].(map[string]any), "debug", "session").(float64); !ok || s != 424242 {
			t.Fatalf("end message %s; want details[0].debug.session the number 424242", end)
		}
	})

	// A malformed grpc-timeout on the gRPC stream (refused by serveStreams,
	// before Connect) has Fence-Reason, as on a unary gRPC call.
	t.Run("grpcStreamTimeout", func(t *testing.T) {
		t.Parallel()
		req, _ := http.NewRequest(http.MethodPost, url+fencev1connect.SessionServiceStreamProcedure, bytes.NewReader(nil))
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("Grpc-Timeout", "soon")
		resp, err := h2cClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		get := func(k string) string { return resp.Header.Get(k) + resp.Trailer.Get(k) }
		if get("Grpc-Status") != "3" || !strings.Contains(get("Grpc-Message"), "grpc-timeout") || get("Fence-Reason") != "INVALID_ARGUMENT" {
			t.Fatalf("header %v trailer %v; want grpc-status 3 naming grpc-timeout, Fence-Reason INVALID_ARGUMENT", resp.Header, resp.Trailer)
		}
	})
}
