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

// Findings of the outside developer's probe of the JSON API (adv11),
// fixed in the server: each subtest is one finding.

// streamJSONReplies sends msgs as one connect+json SessionService.Stream
// (the request side closed after them) and returns the replies, decoded
// with exact numbers (json.Number), and the end message.
func streamJSONReplies(t *testing.T, url string, msgs ...string) ([]map[string]any, []byte) {
	t.Helper()
	var body []byte
	for _, m := range msgs {
		body = binary.BigEndian.AppendUint32(append(body, 0), uint32(len(m)))
		body = append(body, m...)
	}
	req, _ := http.NewRequest(http.MethodPost, url+fencev1connect.SessionServiceStreamProcedure, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/connect+json")
	resp, err := h2cClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var (
		replies []map[string]any
		end     []byte
	)
	for b := raw; len(b) >= 5; {
		n := binary.BigEndian.Uint32(b[1:5])
		if int(n) > len(b)-5 {
			t.Fatalf("stream body %q: a message past the end", raw)
		}
		msg := b[5 : 5+n]
		if b[0]&2 != 0 {
			end = msg
		} else {
			dec := json.NewDecoder(bytes.NewReader(msg))
			dec.UseNumber()
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				t.Fatalf("reply %q: %v", msg, err)
			}
			replies = append(replies, m)
		}
		b = b[5+n:]
	}
	return replies, end
}

// TestAdv11StreamCallIDs (F14): a call id is echoed as a JSON number, so it
// must stay below 2^53 like every other integer of the contract: 2^53 - 1
// is served, 2^53 and 2^64 - 1 (also sent as strings, as protobuf-es does)
// are refused INVALID_ARGUMENT naming call and the bound. A first message
// with a call but no op is answered INVALID_ARGUMENT (field op), as a later
// one is — not left without a reply.
func TestAdv11StreamCallIDs(t *testing.T) {
	_, url := startServer(t)
	open := object(t, sendJSON(t, url, "/fence.v1.SessionService/Open", `{"ttl":10}`))
	id := int64(number(t, open, "session", "id"))

	replies, end := streamJSONReplies(t, url,
		fmt.Sprintf(`{"session":%d,"call":1}`, id),
		`{"call":9007199254740991,"read":{"resource":"a"}}`,
		`{"call":"9007199254740992","read":{"resource":"a"}}`,
		`{"call":"18446744073709551615","read":{"resource":"a"}}`,
		`{"call":5}`,
	)
	if len(replies) != 5 {
		t.Fatalf("%d replies %v (end %s); want 5", len(replies), replies, end)
	}
	byCall := map[string]map[string]any{}
	for _, r := range replies {
		byCall[fmt.Sprint(r["call"])] = r
	}
	for _, c := range []string{"1", "5"} {
		r := byCall[c]
		if at(r, "error", "reason") != "INVALID_ARGUMENT" || at(r, "error", "field") != "op" {
			t.Errorf("reply to call %s (no op): %v; want error INVALID_ARGUMENT field op", c, r)
		}
	}
	if r := byCall["9007199254740991"]; r == nil || r["error"] != nil || r["read"] == nil {
		t.Errorf("call 2^53-1: %v; want a read reply", r)
	}
	for _, c := range []string{"9007199254740992", "18446744073709551615"} {
		r := byCall[c]
		msg, _ := at(r, "message").(string)
		if at(r, "error", "reason") != "INVALID_ARGUMENT" || at(r, "error", "field") != "call" ||
			!strings.Contains(msg, "9007199254740991") || r["read"] != nil {
			t.Errorf("call %s: %v; want error INVALID_ARGUMENT field call naming the bound 9007199254740991, nothing read", c, r)
		}
	}
}

// TestAdv11EveryRefusalHasAReason (F2, F7, F8, F10, F13, 404): refusals
// outside Fence's own table carry Fence-Reason too (the code's name in
// capitals), and a JSON body with reason (and facts where a field is at
// fault); an unsupported type — a Connect streaming type on a unary
// method, gRPC-Web's text mode — is the documented 415.
func TestAdv11EveryRefusalHasAReason(t *testing.T) {
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

// TestAdv11ValueAndText (F9): one rule for a write's value and text —
// both non-empty is refused (field text); an empty one counts as absent,
// whichever it is.
func TestAdv11ValueAndText(t *testing.T) {
	_, url := startServer(t)
	acq := object(t, sendJSON(t, url, fencev1connect.LockServiceAcquireProcedure, `{"name":"vt","owner":"o","ttl":30}`))
	token := int64(number(t, acq, "lease", "token"))
	for _, tc := range []struct{ fields, want string }{
		{`"value":"OA==","text":""`, "8"},
		{`"value":"","text":"9"`, "9"},
		{`"text":"7"`, "7"},
	} {
		r := sendJSON(t, url, fencev1connect.ResourceServiceWriteProcedure, fmt.Sprintf(`{"resource":"vt","token":%d,%s}`, token, tc.fields))
		if m := object(t, r); r.status != http.StatusOK || at(m, "state", "text") != tc.want {
			t.Fatalf("write {%s}: %d %s; want 200 and text %q", tc.fields, r.status, r.body, tc.want)
		}
	}
	r := sendJSON(t, url, fencev1connect.ResourceServiceWriteProcedure, fmt.Sprintf(`{"resource":"vt","token":%d,"value":"OA==","text":"9"}`, token))
	if m := object(t, r); r.status != http.StatusBadRequest || at(m, "facts", "field") != "text" {
		t.Fatalf("write value and text both non-empty: %d %s; want 400 field text", r.status, r.body)
	}
}

// TestAdv11AcquireTTLWithSession (F17): an acquire bound to a session with
// a ttl is refused naming ttl, as Renew refuses it (the lease would live
// as long as the session, not the ttl asked for) — unary and on the
// stream; without ttl it is granted.
func TestAdv11AcquireTTLWithSession(t *testing.T) {
	_, url := startServer(t)
	open := object(t, sendJSON(t, url, fencev1connect.SessionServiceOpenProcedure, `{"ttl":"10s"}`))
	id := int64(number(t, open, "session", "id"))
	r := sendJSON(t, url, fencev1connect.LockServiceAcquireProcedure, fmt.Sprintf(`{"name":"a","owner":"s","ttl":"60s","session":{"id":%d}}`, id))
	m := object(t, r)
	if msg, _ := m["message"].(string); r.status != http.StatusBadRequest || at(m, "facts", "field") != "ttl" || !strings.Contains(msg, "leave ttl out") {
		t.Fatalf("unary acquire with ttl and session: %d %s; want 400 field ttl, 'leave ttl out'", r.status, r.body)
	}
	if g := sendJSON(t, url, "/fence.v1.LockService/Get", `{"name":"a"}`); strings.Contains(string(g.body), `"holder"`) {
		t.Fatalf("refused acquire took the lock: %s", g.body)
	}
	replies, end := streamJSONReplies(t, url,
		fmt.Sprintf(`{"session":%d,"call":1,"acquire":{"name":"a","owner":"s","ttl":"60s"}}`, id),
	)
	if len(replies) != 1 || at(replies[0], "error", "field") != "ttl" {
		t.Fatalf("stream acquire with ttl: %v (end %s); want a refusal naming ttl", replies, end)
	}
	r = sendJSON(t, url, fencev1connect.LockServiceAcquireProcedure, fmt.Sprintf(`{"name":"a","owner":"s","session":{"id":%d}}`, id))
	if m := object(t, r); r.status != http.StatusOK || at(m, "lease", "ttl") != "10s" {
		t.Fatalf("acquire on the session without ttl: %d %s; want 200, the session's 10s", r.status, r.body)
	}
}

// TestAdv11StrictInputs (F3, F4, F5, F12): a duration finer than a
// nanosecond is refused in every form (it was truncated as a string); one
// beyond the largest duration is named as sent; a null token is refused as
// null, a token string that is not decimal digits ("1e2", "1.0", "01") is
// refused; a type error names an object; too deep nesting says so.
func TestAdv11StrictInputs(t *testing.T) {
	_, url := startServer(t)
	acquire := fencev1connect.LockServiceAcquireProcedure
	refused := func(t *testing.T, path, body, field string, says ...string) {
		t.Helper()
		r := sendJSON(t, url, path, body)
		m := object(t, r)
		msg, _ := m["message"].(string)
		if r.status != http.StatusBadRequest || at(m, "facts", "field") != field {
			t.Fatalf("%s: %d %s; want 400 naming field %s", body, r.status, r.body, field)
		}
		for _, s := range says {
			if !strings.Contains(msg, s) {
				t.Fatalf("%s: message %q; want it to say %q", body, msg, s)
			}
		}
	}
	for _, ttl := range []string{`"1.0000000005s"`, `"1000000000.5ns"`, `"0.5ns"`, `1.0000000005`, `"1.5e1s"`} {
		refused(t, acquire, `{"name":"d","owner":"o","ttl":`+ttl+`}`, "ttl", "must be a duration")
	}
	for _, ttl := range []string{`"30s"`, `"250ms"`, `"0.250s"`, `"1m30s"`, `"10.5ms"`, `"1000000000ns"`, `0.25`} {
		r := sendJSON(t, url, acquire, `{"name":"ok`+strings.Trim(ttl, `"`)+`","owner":"o","ttl":`+ttl+`}`)
		if r.status != http.StatusOK {
			t.Fatalf("ttl %s: %d %s; want it accepted", ttl, r.status, r.body)
		}
	}
	refused(t, acquire, `{"name":"d","owner":"o","ttl":9223372037}`, "ttl", "invalid ttl 9223372037:")
	refused(t, acquire, `{"name":"d","owner":"o","ttl":"315576000000s"}`, "ttl", "invalid ttl 315576000000s:")
	refused(t, acquire, `{"name":"d","owner":"o","ttl":1e20}`, "ttl", "invalid ttl 1e20:")

	write := fencev1connect.ResourceServiceWriteProcedure
	refused(t, write, `{"resource":"r","token":null,"text":"x"}`, "token", "invalid token null:", "not null")
	for _, tok := range []string{`"1e2"`, `"1.0"`, `"01"`, `" 3"`} {
		refused(t, write, `{"resource":"r","token":`+tok+`,"text":"x"}`, "token", "a string of digits")
	}
	refused(t, write, `{"resource":"r","token":"1","text":"x","session":{"id":"1e0"}}`, "session.id", "a string of digits")
	if r := sendJSON(t, url, write, `{"resource":"r","token":"100","text":"x"}`); r.header.Get("Fence-Reason") != "UNKNOWN_TOKEN" {
		t.Fatalf(`token "100": %d %s; want it read (UNKNOWN_TOKEN)`, r.status, r.body)
	}

	refused(t, acquire, `{"name":{"a":1},"owner":"o","ttl":30}`, "name", "must be a JSON string, got an object")
	deep := `{"name":"x","bogus":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`
	refused(t, acquire, deep, "body", "nested too deep")
}
