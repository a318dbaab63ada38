package ui

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fenceworks/fence"
)

// Every file of the page is served with the CSP, nosniff and no framing;
// the page learns its mode from index.html; Off serves nothing.
func TestHandlerServesThePageWithItsHeaders(t *testing.T) {
	for _, m := range []Mode{Read, Full} {
		h := Handler(m)
		for path, ctype := range map[string]string{"/ui/": "text/html", "/ui/index.html": "text/html", "/ui/app.js": "text/javascript", "/ui/style.css": "text/css"} {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
			if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), ctype) {
				t.Fatalf("%s %s: %d %q", m, path, w.Code, w.Header().Get("Content-Type"))
			}
			if w.Header().Get("Content-Security-Policy") != ContentSecurityPolicy || w.Header().Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s %s: headers %v", m, path, w.Header())
			}
			if strings.HasPrefix(ctype, "text/html") && !strings.Contains(w.Body.String(), `<meta name="fence-ui-mode" content="`+string(m)+`">`) {
				t.Errorf("%s %s: the page does not carry its mode", m, path)
			}
		}
	}
	for _, path := range []string{"/ui/", "/ui/app.js", "/ui"} {
		w := httptest.NewRecorder()
		Handler(Off).ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != http.StatusNotFound {
			t.Errorf("off %s: %d, want 404", path, w.Code)
		}
	}
	w := httptest.NewRecorder()
	Handler(Full).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/ui/nothing.js", nil))
	if w.Code != http.StatusNotFound {
		t.Errorf("an unknown file: %d, want 404", w.Code)
	}
}

// The CSP allows no inline script, inline style or eval, and the page's
// files use none: no inline <script> body, no style attribute, no
// on*= handler attribute, no eval or Function constructor.
func TestThePageNeedsNothingTheCSPForbids(t *testing.T) {
	for _, bad := range []string{"'unsafe-inline'", "'unsafe-eval'"} {
		if strings.Contains(ContentSecurityPolicy, bad) {
			t.Fatalf("CSP allows %s", bad)
		}
	}
	html, _ := assets.ReadFile("assets/index.html")
	js, _ := assets.ReadFile("assets/app.js")
	for _, bad := range []string{"<script>", " style=", " onclick=", " onload=", " onsubmit="} {
		if strings.Contains(string(html), bad) {
			t.Errorf("index.html holds %q", bad)
		}
	}
	for _, bad := range []string{"eval(", "new Function(", "innerHTML", "setAttribute('style'", "insertAdjacentHTML"} {
		if strings.Contains(string(js), bad) {
			t.Errorf("app.js holds %q", bad)
		}
	}
}

func TestParseMode(t *testing.T) {
	for _, s := range []string{"off", "read", "full"} {
		if m, err := ParseMode(s); err != nil || string(m) != s {
			t.Errorf("ParseMode(%q) = %q, %v", s, m, err)
		}
	}
	_, err := ParseMode("yes")
	var ie *fence.InvalidError
	if !errors.As(err, &ie) || ie.Field != "config.ui" {
		t.Fatalf("ParseMode(yes): %v, want an InvalidError naming config.ui", err)
	}
}
