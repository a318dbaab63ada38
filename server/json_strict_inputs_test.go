package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// Strict JSON inputs: a duration finer than a nanosecond is refused in
// every form (a string form is not truncated); one
// beyond the largest duration is named as sent; a null token is refused as
// null, a token string that is not decimal digits ("1e2", "1.0", "01") is
// refused; a type error names an object; too deep nesting says so.
func TestStrictJSONInputs(t *testing.T) {
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
