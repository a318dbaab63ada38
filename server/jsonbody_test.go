package server

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
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
		{"/fence.v1.LockService/Acquire", `{"name":"x","ttl":"250ms"}`, "ttl", `"0.25s"`},
		{"/fence.v1.LockService/Acquire", `{"name":"x","ttl":"5s","lockDelay":"soon"}`, "lock_delay", "duration"},
		{"/fence.v1.LockService/Acquire", "{\"name\":\"\xff\xfe\",\"ttl\":\"5s\"}", "name", "valid UTF-8"},
		{"/fence.v1.LockService/Renew", `{"name":"x","token":"-1"}`, "token", "unsigned integer"},
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
