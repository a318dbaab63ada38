package server

import (
	"fmt"
	"net/http"
	"testing"

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
}
