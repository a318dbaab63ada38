package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// One rule for a write's value and text —
// both non-empty is refused (field text); an empty one counts as absent,
// whichever it is.
func TestWriteValueAndText(t *testing.T) {
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
	// A text over the value bound is refused naming text (the client sent
	// no value), with value's bound.
	big := strings.Repeat("x", fence.MaxValueBytes+1)
	r = sendJSON(t, url, fencev1connect.ResourceServiceWriteProcedure, fmt.Sprintf(`{"resource":"vt","token":%d,"text":%q}`, token, big))
	if m := object(t, r); r.status != http.StatusBadRequest || at(m, "facts", "field") != "text" || !strings.Contains(string(r.body), fmt.Sprintf("at most %d bytes", fence.MaxValueBytes)) {
		t.Fatalf("write of a %d-byte text: %d %.300s; want 400 field text at most %d bytes", len(big), r.status, r.body, fence.MaxValueBytes)
	}
}
