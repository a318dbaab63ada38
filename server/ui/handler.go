package ui

import (
	"bytes"
	"embed"
	"net/http"
	"strings"
)

//go:embed assets/index.html assets/app.js assets/style.css
var assets embed.FS

// ContentSecurityPolicy is sent with every answer under /ui/: only the
// page's own files, no inline script or style, no eval, calls only to the
// same origin, never inside a frame.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// modeMarker in index.html is replaced by the mode, so the page knows it
// before its first call.
const modeMarker = "{{MODE}}"

type file struct {
	body  []byte
	ctype string
}

// Handler serves the page under /ui/ (and redirects /ui there). With Off
// every path is 404.
func Handler(m Mode) http.Handler {
	if m == Off || m == "" && DefaultMode == Off {
		return http.NotFoundHandler()
	}
	if m == "" {
		m = DefaultMode
	}
	files := map[string]file{}
	for name, ctype := range map[string]string{
		"index.html": "text/html; charset=utf-8",
		"app.js":     "text/javascript; charset=utf-8",
		"style.css":  "text/css; charset=utf-8",
	} {
		b, err := assets.ReadFile("assets/" + name)
		if err != nil {
			panic("ui: embedded " + name + ": " + err.Error()) // go:embed lists it
		}
		if name == "index.html" {
			b = bytes.ReplaceAll(b, []byte(modeMarker), []byte(m))
		}
		files[name] = file{b, ctype}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == "/ui" {
			http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, "/ui/")
		if name == "" {
			name = "index.html"
		}
		f, ok := files[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h.Set("Content-Type", f.ctype)
		w.Write(f.body) //nolint:errcheck // the client went away
	})
}
