package server

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// TestBadJSONNamesTheField (G7): a JSON body the protobuf decoder refuses
// gets the same refusal as every other bad input — invalid_argument with an
// ErrorDetail whose reason is INVALID_ARGUMENT and whose field is the
// offending one — and the server keeps serving.
func TestBadJSONNamesTheField(t *testing.T) {
	_, url := startServer(t)
	for _, tc := range []struct {
		path, body, field, bound string
	}{
		{"/fence.v1.LockService/Acquire", `{"name": "x", "ttl": `, "body", "a JSON object"},
		{"/fence.v1.LockService/Acquire", `[1,2]`, "body", "a JSON object"},
		{"/fence.v1.LockService/Acquire", `{"name":"x","ttl":"250 ms"}`, "ttl", `"250ms"`},
		{"/fence.v1.LockService/Acquire", `{"name":"x","ttl":"5s","lockDelay":"soon"}`, "lock_delay", "duration"},
		{"/fence.v1.LockService/Acquire", "{\"name\":\"\xff\xfe\",\"ttl\":\"5s\"}", "name", "valid UTF-8"},
		{"/fence.v1.LockService/Renew", `{"name":"x","token":"-1"}`, "token", "unsigned 64-bit integer"},
		{"/fence.v1.ResourceService/Add", `{"resource":"r","token":1,"delta":"many"}`, "delta", "integer"},
		{"/fence.v1.ResourceService/Write", `{"resource":"r","token":1,"value":"not base64!"}`, "value", "base64"},
	} {
		resp, err := http.Post(url+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Code    string
			Details []struct{ Type, Value string }
		}
		if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Code != "invalid_argument" || len(e.Details) != 1 {
			t.Errorf("%s %q: status %d body %s; want 400 invalid_argument with one detail", tc.path, tc.body, resp.StatusCode, body)
			continue
		}
		raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(e.Details[0].Value, "="))
		var d fencev1.ErrorDetail
		if err != nil || proto.Unmarshal(raw, &d) != nil {
			t.Errorf("%q: undecodable detail %q", tc.body, e.Details[0].Value)
			continue
		}
		if d.Reason != "INVALID_ARGUMENT" || d.Field != tc.field || !strings.Contains(d.Bound, tc.bound) {
			t.Errorf("%q: detail reason=%s field=%q bound=%q; want INVALID_ARGUMENT, %q, bound containing %q", tc.body, d.Reason, d.Field, d.Bound, tc.field, tc.bound)
		}
	}
	// A good JSON body still goes through, byte for byte.
	resp, err := http.Post(url+"/fence.v1.LockService/Acquire", "application/json", strings.NewReader(`{"name":"after-bad-json","ttl":"1s"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"after-bad-json"`) {
		t.Fatalf("after bad input: status %d body %s", resp.StatusCode, body)
	}
}

// jsonReply is a unary Connect JSON reply: the body, or the error and its
// ErrorDetail.
type jsonReply struct {
	status  int
	body    string
	code    string
	message string
	detail  *fencev1.ErrorDetail // nil when there is none
}

// postJSON POSTs body to url+path with Content-Type application/json and
// the given extra headers, and decodes a Connect error reply.
func postJSON(t *testing.T, url, path string, body []byte, header map[string]string) jsonReply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	r := jsonReply{status: resp.StatusCode, body: string(raw)}
	if resp.StatusCode == http.StatusOK {
		return r
	}
	var e struct {
		Code, Message string
		Details       []struct{ Type, Value string }
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatalf("%s %s: status %d, undecodable error body %q", path, body, resp.StatusCode, raw)
	}
	r.code, r.message = e.Code, e.Message
	if len(e.Details) == 1 {
		b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(e.Details[0].Value, "="))
		var d fencev1.ErrorDetail
		if err != nil || proto.Unmarshal(b, &d) != nil {
			t.Fatalf("%s %s: undecodable detail %q", path, body, e.Details[0].Value)
		}
		r.detail = &d
	}
	return r
}

// wantInvalidJSON checks r is invalid_argument with an INVALID_ARGUMENT
// detail for field whose bound contains bound, and a message that contains
// message.
func wantInvalidJSON(t *testing.T, what string, r jsonReply, field, bound, message string) {
	t.Helper()
	if r.status != http.StatusBadRequest || r.code != "invalid_argument" || r.detail == nil {
		t.Fatalf("%s: status %d body %s; want 400 invalid_argument with one detail", what, r.status, r.body)
	}
	d := r.detail
	if d.Reason != "INVALID_ARGUMENT" || d.Field != field || !strings.Contains(d.Bound, bound) || !strings.Contains(r.message, message) {
		t.Fatalf("%s: detail reason=%s field=%q bound=%q, message %q; want INVALID_ARGUMENT, %q, bound containing %q, message containing %q",
			what, d.Reason, d.Field, d.Bound, r.message, field, bound, message)
	}
}

// TestUnknownJSONFieldsRefused: a field the request message does not have
// is refused with invalid_argument naming it, not silently dropped. Before,
// `opID` (neither op_id nor opId) was ignored and an add sent three times
// was applied three times; `bogus` was granted; `wiat` made a wait a try.
func TestUnknownJSONFieldsRefused(t *testing.T) {
	_, url := startServer(t)
	lease := postJSON(t, url, "/fence.v1.LockService/Acquire", []byte(`{"name":"typo-lock","owner":"A","ttl":"3600s"}`), nil)
	var got struct{ Lease struct{ Token uint64 } }
	if lease.status != http.StatusOK || json.Unmarshal([]byte(lease.body), &got) != nil {
		t.Fatalf("acquire: %d %s", lease.status, lease.body)
	}
	tok := strconv.FormatUint(got.Lease.Token, 10)

	typo := []byte(`{"resource":"typo","token":` + tok + `,"delta":1,"opID":"once"}`)
	for i := 0; i < 3; i++ {
		wantInvalidJSON(t, "add with opID", postJSON(t, url, "/fence.v1.ResourceService/Add", typo, nil),
			"opID", "a field of fence.v1.AddRequest (resource, token, delta, op_id, session, signed_token)", "invalid opID: must be a field of fence.v1.AddRequest")
	}
	read := postJSON(t, url, "/fence.v1.ResourceService/Read", []byte(`{"resource":"typo"}`), nil)
	if read.status != http.StatusOK || strings.Contains(read.body, `"version"`) {
		t.Fatalf("after three refused adds: read %d %s; want the resource never written", read.status, read.body)
	}
	// Both spellings protojson knows stay accepted, and keep idempotency.
	for _, spelling := range []string{"op_id", "opId", "op_id"} {
		r := postJSON(t, url, "/fence.v1.ResourceService/Add", []byte(`{"resource":"typo","token":`+tok+`,"delta":1,"`+spelling+`":"once"}`), nil)
		if r.status != http.StatusOK || !strings.Contains(r.body, `"value":1`) {
			t.Fatalf("add with %s: %d %s; want value 1 every time", spelling, r.status, r.body)
		}
	}

	wantInvalidJSON(t, "acquire with bogus", postJSON(t, url, "/fence.v1.LockService/Acquire", []byte(`{"name":"x","ttl":"5s","bogus":1}`), nil),
		"bogus", "a field of fence.v1.AcquireRequest", "invalid bogus")
	wantInvalidJSON(t, "acquire with wiat", postJSON(t, url, "/fence.v1.LockService/Acquire", []byte(`{"name":"typo-lock","owner":"B","ttl":"5s","wiat":"2s"}`), nil),
		"wiat", "a field of fence.v1.AcquireRequest", "invalid wiat")
	if r := postJSON(t, url, "/fence.v1.LockService/Get", []byte(`{"name":"x"}`), nil); r.status != http.StatusOK || strings.Contains(r.body, "lease") {
		t.Fatalf("get x after a refused acquire: %d %s; want no lease", r.status, r.body)
	}

	// Gzip-compressed JSON is decoded by Connect (no detail), and refused too.
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	zw.Write(typo)
	zw.Close()
	r := postJSON(t, url, "/fence.v1.ResourceService/Add", zipped.Bytes(), map[string]string{"Content-Encoding": "gzip"})
	if r.status != http.StatusBadRequest || r.code != "invalid_argument" || !strings.Contains(r.message, "invalid opID: must be a field of fence.v1.AddRequest") {
		t.Fatalf("gzipped add with opID: %d %s; want 400 invalid_argument naming opID", r.status, r.body)
	}

	// Binary protobuf keeps accepting unknown fields (field 99, varint 1).
	msg, err := proto.Marshal(&fencev1.GetRequest{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	msg = append(msg, 0x98, 0x06, 0x01)
	resp, err := http.Post(url+"/fence.v1.LockService/Get", "application/proto", bytes.NewReader(msg))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("binary get with an unknown field: status %d; want 200", resp.StatusCode)
	}
}

// TestJSONRefusalsReadWell: every JSON body the decoder refuses is answered
// "invalid FIELD: must be RULE" in words of the server's own, never the
// decoder's ("must be unexpected token null", "must be unexpected EOF").
func TestJSONRefusalsReadWell(t *testing.T) {
	_, url := startServer(t)
	const acquire, list = "/fence.v1.LockService/Acquire", "/fence.v1.LockService/List"
	for _, tc := range []struct {
		path, body, field, bound string
	}{
		{acquire, `null`, "body", "a JSON object, got null"},
		{acquire, ` [1,2]`, "body", "a JSON object, got an array"},
		{acquire, `"x"`, "body", "a JSON object, got a string"},
		{acquire, `7`, "body", "a JSON object, got a number"},
		{acquire, `true`, "body", "a JSON object, got true"},
		{acquire, ``, "body", "a JSON object, got an empty body"},
		{acquire, `{"name": "x", "ttl": `, "body", "a JSON object, got JSON that ends early (after 21 bytes)"},
		{acquire, `{"name":"x"} extra`, "body", "a JSON object, got malformed JSON (at byte 14)"},
		{acquire, `{"name":"x","ttl":"5s",}`, "body", "a JSON object, got malformed JSON (at byte 24)"},
		{acquire, `{"name":"x\ud800","ttl":"5s"}`, "name", `valid UTF-8 (a lone surrogate \ud800)`},
		{acquire, `{"name":"\\\udc00x","ttl":"5s"}`, "name", `valid UTF-8 (a lone surrogate \udc00)`},
		{acquire, `{"name":"\ud800\u0041","ttl":"5s"}`, "name", `valid UTF-8 (a lone surrogate \ud800)`},
		{acquire, "{\"owner\":\"\xff\",\"name\":\"x\",\"ttl\":\"5s\"}", "owner", "valid UTF-8"},
		{acquire, `{"name":"\ud83d\ude00","ttl":"5"}`, "ttl", durationBound},
		{acquire, `{"name":1,"ttl":"5s"}`, "name", "a JSON string, got a number"},
		{acquire, `{"name":"x","ttl":{}}`, "ttl", durationBound},
		{acquire, `{"name":"x","name":"y","ttl":"5s"}`, "name", `given once (got "name" and "name")`},
		{acquire, `{"name":"x","requestId":"a","request_id":"b","ttl":"5s"}`, "request_id", `given once (got "requestId" and "request_id")`},
		{list, `{"pageSize":5000000000}`, "page_size", "an unsigned 32-bit integer (a JSON number or a string of digits)"},
		{"/fence.v1.LockService/Renew", `{"name":"x","token":1e400}`, "token", "an unsigned 64-bit integer (a JSON number or a string of digits)"},
		{"/fence.v1.LockService/Renew", `{"name":"x","":1}`, `""`, "a field of fence.v1.RenewRequest (name, token, ttl, session)"},
		{"/fence.v1.LockService/Renew", `{"name":"x","token":-1}`, "token", "an unsigned 64-bit integer (a JSON number or a string of digits)"},
		{"/fence.v1.ResourceService/Add", `{"resource":"r","token":1,"delta":1.5}`, "delta", "a 64-bit integer (a JSON number or a string of digits)"},
		{"/fence.v1.ResourceService/Write", `{"resource":"r","token":1,"value":"no!"}`, "value", "base64 (standard or URL-safe alphabet)"},
	} {
		r := postJSON(t, url, tc.path, []byte(tc.body), nil)
		want := "invalid " + tc.field + ": must be " + tc.bound
		wantInvalidJSON(t, tc.body, r, tc.field, tc.bound, want)
		if r.message != want || r.detail.Bound != tc.bound {
			t.Errorf("%s %q: message %q bound %q; want %q", tc.path, tc.body, r.message, r.detail.Bound, want)
		}
	}
}
