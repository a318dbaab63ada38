package server

import (
	"net/http"
	"strings"
	"testing"
)

// The router in front of the mux: API procedures reach Connect, unknown
// procedures and paths are 404, and the mux's routes keep their methods.
func TestRouting(t *testing.T) {
	_, url := startServer(t)
	for _, tc := range []struct {
		method, path, body string
		want               int
	}{
		{"POST", "/fence.v1.LockService/Get", `{"name":"a"}`, http.StatusOK},
		{"POST", "/fence.v1.ResourceService/Read", `{"resource":"r"}`, http.StatusOK},
		{"POST", "/fence.v1.LockService/Nope", `{}`, http.StatusNotFound},
		{"POST", "/fence.v1.Nope/Get", `{}`, http.StatusNotFound},
		{"GET", "/nope", "", http.StatusNotFound},
		{"GET", "/healthz", "", http.StatusOK},
		{"POST", "/healthz", "", http.StatusMethodNotAllowed},
	} {
		req, err := http.NewRequest(tc.method, url+tc.path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s = %d, want %d", tc.method, tc.path, resp.StatusCode, tc.want)
		}
	}
}
