package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// Refusals outside Fence's own table (a ClusterService precondition,
// Health's not_found, an unknown field of a non-Fence message, an
// unsupported Content-Type or Content-Encoding, a broken gzip body, an
// unknown path) carry Fence-Reason too (the code's name in
// capitals), and a JSON body with reason (and facts where a field is at
// fault); an unsupported type — a Connect streaming type on a unary
// method, gRPC-Web's text mode — is the documented 415.
func TestEveryRefusalHasAReason(t *testing.T) {
	_, url := startServer(t)
	const js = "application/json"
	check := func(t *testing.T, r reply, status int, reason string) map[string]any {
		t.Helper()
		if r.status != status || r.header.Get("Fence-Reason") != reason {
			t.Fatalf("status %d Fence-Reason %q body %s; want %d and %s", r.status, r.header.Get("Fence-Reason"), r.body, status, reason)
		}
		if !strings.HasPrefix(r.header.Get("Content-Type"), js) {
			return nil
		}
		m := object(t, r)
		if at(m, "reason") != reason {
			t.Fatalf("body %s; want reason %s", r.body, reason)
		}
		return m
	}

	t.Run("clusterServiceRefusal", func(t *testing.T) {
		r := sendJSON(t, url, fencev1connect.ClusterServiceAddMemberProcedure, `{"id":"x","raftAddr":"127.0.0.1:1"}`)
		check(t, r, http.StatusBadRequest, "FAILED_PRECONDITION")
	})
	t.Run("healthNotFound", func(t *testing.T) {
		check(t, sendJSON(t, url, healthCheckProcedure, `{"service":"nope"}`), http.StatusNotFound, "NOT_FOUND")
	})
	t.Run("unknownFieldHealthAndCluster", func(t *testing.T) {
		for _, path := range []string{healthCheckProcedure, fencev1connect.ClusterServiceMembersProcedure} {
			r := sendJSON(t, url, path, `{"bogus":1}`)
			m := check(t, r, http.StatusBadRequest, "INVALID_ARGUMENT")
			if at(m, "facts", "field") != "bogus" || strings.Contains(string(r.body), "connectext") {
				t.Fatalf("%s: body %s; want facts.field bogus, no connectext", path, r.body)
			}
		}
	})
	t.Run("connectStreamingTypeOnUnary", func(t *testing.T) {
		for _, ct := range []string{"application/connect+json", "application/connect+proto"} {
			r := send(t, url, fencev1connect.LockServiceGetProcedure, []byte(`{"name":"x"}`), "Content-Type", ct, "Accept", js)
			m := check(t, r, http.StatusUnsupportedMediaType, "INVALID_ARGUMENT")
			if at(m, "facts", "got") != ct || r.header.Get("Accept-Post") == "" {
				t.Fatalf("%s: body %s Accept-Post %q; want facts.got and Accept-Post", ct, r.body, r.header.Get("Accept-Post"))
			}
			if r := send(t, url, fencev1connect.LockServiceGetProcedure, []byte(`{"name":"x"}`), "Content-Type", ct); !strings.Contains(string(r.body), ct) {
				t.Fatalf("%s without Accept: %d %q; want a text body naming it", ct, r.status, r.body)
			}
		}
	})
	t.Run("unknownContentEncoding", func(t *testing.T) {
		r := send(t, url, fencev1connect.LockServiceGetProcedure, []byte(`{}`), "Content-Type", js, "Content-Encoding", "br")
		check(t, r, http.StatusNotImplemented, "UNIMPLEMENTED")
	})
	t.Run("brokenGzip", func(t *testing.T) {
		r := send(t, url, fencev1connect.LockServiceGetProcedure, []byte("\x1f\x8b\x08\x00garbage"), "Content-Type", js, "Content-Encoding", "gzip")
		if m := check(t, r, http.StatusBadRequest, "INVALID_ARGUMENT"); at(m, "facts", "field") != "body" {
			t.Fatalf("body %s; want facts.field body", r.body)
		}
	})
	t.Run("unknownPath", func(t *testing.T) {
		r := sendJSON(t, url, "/fence.v1.LockService/Bogus", `{}`)
		if m := check(t, r, http.StatusNotFound, "NOT_FOUND"); at(m, "facts", "path") != "/fence.v1.LockService/Bogus" {
			t.Fatalf("body %s; want facts.path", r.body)
		}
		resp, err := http.Get(url + "/nope")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Fence-Reason") != "NOT_FOUND" || !strings.Contains(string(b), `"/nope"`) {
			t.Fatalf("GET /nope: %d Fence-Reason %q %q; want 404 NOT_FOUND naming the path", resp.StatusCode, resp.Header.Get("Fence-Reason"), b)
		}
		if resp, err := http.Get(url + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /healthz: %v %v", resp, err)
		}
	})
	t.Run("grpcWebText", func(t *testing.T) {
		frame := []byte("AAAAAAMKAXg=") // base64 of a framed GetRequest{name:"x"}
		for _, ct := range []string{"application/grpc-web-text", "application/grpc-web-text+proto"} {
			r := send(t, url, fencev1connect.LockServiceGetProcedure, frame, "Content-Type", ct, "Accept", js)
			m := check(t, r, http.StatusUnsupportedMediaType, "INVALID_ARGUMENT")
			if at(m, "facts", "got") != ct || r.header.Get("Accept-Post") == "" || !strings.Contains(fmt.Sprint(m["message"]), "text mode") {
				t.Fatalf("%s: body %s Accept-Post %q; want 415 naming the text mode, facts.got, Accept-Post", ct, r.body, r.header.Get("Accept-Post"))
			}
		}
	})
}
