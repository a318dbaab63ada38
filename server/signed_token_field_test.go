package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// A write that sends only a malformed signedToken (its token to come from
// it) is refused naming signed_token, not a token 0 it never sent, and
// the refusal does not echo the text (a proof is a bearer credential).
func TestMalformedSignedTokenIsNamed(t *testing.T) {
	_, url := startServerDeps(t, Config{}, nil)
	text := "7.c1.AAAAAAAAAAAA.xyz xyz"
	res, err := http.Post(url+"/fence.v1.ResourceService/Write", "application/json",
		strings.NewReader(`{"resource":"r","signedToken":"`+text+`","value":"eA=="}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	body := string(raw)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "signed_token") || strings.Contains(body, "invalid token 0") {
		t.Fatalf("%d %s: want 400 naming signed_token", res.StatusCode, body)
	}
	if strings.Contains(body, "xyz xyz") {
		t.Fatalf("the refusal echoes the signed token's text: %s", body)
	}
}
