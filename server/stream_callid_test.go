package server

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

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

// A stream's call id is echoed as a JSON number, so it must stay below
// 2^53 like every other integer of the contract: 2^53 - 1
// is served, 2^53 and 2^64 - 1 (also sent as strings, as protobuf-es does)
// are refused INVALID_ARGUMENT naming call and the bound. A first message
// with a call but no op is answered INVALID_ARGUMENT (field op), as a later
// one is — not left without a reply.
func TestStreamCallIDsAreExactJSONNumbers(t *testing.T) {
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
	// A refused call id is not echoed (it would be inexact as a JSON
	// number): the reply has call 0, and its error names the id exactly.
	var refused []string
	for _, r := range replies {
		if at(r, "error", "field") == "call" {
			refused = append(refused, fmt.Sprint(at(r, "error", "got")))
			msg, _ := at(r, "message").(string)
			if at(r, "error", "reason") != "INVALID_ARGUMENT" || !strings.Contains(msg, "9007199254740991") || r["read"] != nil || (r["call"] != nil && fmt.Sprint(r["call"]) != "0") {
				t.Errorf("refused call: %v; want error INVALID_ARGUMENT naming the bound 9007199254740991, call 0, nothing read", r)
			}
		}
	}
	slices.Sort(refused)
	if want := []string{"18446744073709551615", "9007199254740992"}; !slices.Equal(refused, want) {
		t.Errorf("refused call ids named %q, want %q exactly (as strings)", refused, want)
	}
}
