package server

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/fenceworks/fence/server/ui"
)

// Every answer under /ui — the page, a file it does not have, a path the
// ServeMux would have cleaned with a redirect (/ui//x, /ui/../), a page
// switched off — carries the page's security headers, and none of them is
// a redirect out of /ui/ (an outside test saw /ui//x and /ui/../ answered
// by the mux's redirects with no header at all, and the 404 of /ui/nope
// without nosniff).
func TestEveryAnswerUnderUICarriesTheHeaders(t *testing.T) {
	for _, mode := range []ui.Mode{ui.Read, ui.Off} {
		_, url := startServerOnNode(t, Config{UI: mode})
		addr := strings.TrimPrefix(url, "http://")
		for _, path := range []string{"/ui/", "/ui/app.js", "/ui/nope", "/ui//x", "/ui/../", "/ui/%2e%2e/", "/ui/./app.js"} {
			resp := rawGet(t, addr, path)
			h := resp.Header
			if got := h.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("--ui=%s GET %s: %d, X-Content-Type-Options %q, want nosniff", mode, path, resp.StatusCode, got)
			}
			if mode == ui.Off {
				if resp.StatusCode != http.StatusNotFound {
					t.Errorf("--ui=off GET %s: %d, want 404", path, resp.StatusCode)
				}
				continue
			}
			if got := h.Get("Content-Security-Policy"); got != ui.ContentSecurityPolicy {
				t.Errorf("--ui=%s GET %s: %d, CSP %q", mode, path, resp.StatusCode, got)
			}
			if got := h.Get("X-Frame-Options"); got != "DENY" {
				t.Errorf("--ui=%s GET %s: %d, X-Frame-Options %q", mode, path, resp.StatusCode, got)
			}
			if resp.StatusCode/100 == 3 {
				t.Errorf("--ui=%s GET %s: a redirect (%d to %q)", mode, path, resp.StatusCode, h.Get("Location"))
			}
			want := http.StatusNotFound
			if path == "/ui/" || path == "/ui/app.js" {
				want = http.StatusOK
			}
			if resp.StatusCode != want {
				t.Errorf("--ui=%s GET %s: %d, want %d", mode, path, resp.StatusCode, want)
			}
		}
	}
}

// rawGet sends GET path as written (no client-side cleaning) and reads the
// answer's status and headers.
func rawGet(t *testing.T, addr, path string) *http.Response {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nConnection: close\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	resp.Body.Close()
	if strings.Contains(path, "..") && resp.StatusCode == http.StatusOK {
		t.Errorf("GET %s served a file", path)
	}
	return resp
}
