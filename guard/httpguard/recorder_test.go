package httpguard

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"testing"
	"time"
)

// A 103 Early Hints is not the final answer: the handler's 200 after it
// commits, the client sees the 103 (with its Link) and then the 200.
func TestEarlyHintsThenOKCommits(t *testing.T) {
	var store MemoryStore
	srv := httptest.NewServer(Middleware(&store, Options{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Header().Set("X-Final", "yes")
		fmt.Fprint(w, "written")
	})))
	defer srv.Close()
	var hints []string
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		hints = append(hints, fmt.Sprintf("%d %s", code, h.Get("Link")))
		return nil
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodPut, srv.URL, nil)
	resp, err := (&http.Client{Transport: &Transport{Lease: staticToken(4), Resource: "r"}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || string(body) != "written" || resp.Header.Get("X-Final") != "yes" || resp.Header.Get("Link") != "" {
		t.Fatalf("final answer %d %q %v; want 200 \"written\" with X-Final and no Link", resp.StatusCode, body, resp.Header)
	}
	if got := store.LastToken("r"); got != 4 {
		t.Fatalf("last token %d after 103 then 200; want 4 (committed)", got)
	}
	if len(hints) != 1 || hints[0] != "103 </style.css>; rel=preload" {
		t.Fatalf("interim answers %q; want the 103 with its Link", hints)
	}
}

// A response body over MaxBuffer is not held without bound: Write fails,
// the transaction rolls back and the client gets 500.
func TestResponseOverMaxBufferRollsBack(t *testing.T) {
	var store MemoryStore
	var writeErr error
	srv := httptest.NewServer(Middleware(&store, Options{MaxBuffer: 16})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := w.Write([]byte("0123456789")); err != nil {
			t.Errorf("first 10 bytes: %v", err)
		}
		_, writeErr = w.Write([]byte("0123456789"))
	})))
	defer srv.Close()
	resp, err := (&http.Client{Transport: &Transport{Lease: staticToken(2), Resource: "r"}}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 500 || !strings.Contains(string(body), "MaxBuffer") {
		t.Fatalf("%d %s; want 500 naming MaxBuffer", resp.StatusCode, body)
	}
	if !errors.Is(writeErr, ErrResponseTooLarge) {
		t.Fatalf("the Write past MaxBuffer returned %v, want ErrResponseTooLarge", writeErr)
	}
	if got := store.LastToken("r"); got != 0 {
		t.Fatalf("last token %d; want 0 (rolled back)", got)
	}
	// Within the bound (exactly 16 bytes) it commits.
	srv2 := httptest.NewServer(Middleware(&store, Options{MaxBuffer: 16})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "0123456789abcdef")
	})))
	defer srv2.Close()
	resp2, err := (&http.Client{Transport: &Transport{Lease: staticToken(2), Resource: "r"}}).Get(srv2.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != 200 || store.LastToken("r") != 2 {
		t.Fatalf("16 bytes with MaxBuffer 16: %d, last token %d", resp2.StatusCode, store.LastToken("r"))
	}
}

// Flush before the commit sends nothing: the client must not see output of
// a write that may still roll back. Hijack is refused; deadlines reach the
// real connection through Unwrap.
func TestFlushBeforeCommitSendsNothing(t *testing.T) {
	var store MemoryStore
	under := httptest.NewRecorder()
	h := Middleware(&store, Options{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "partial")
		if _, ok := w.(http.Flusher); !ok {
			t.Error("the fenced writer is not an http.Flusher")
		}
		rc := http.NewResponseController(w)
		if err := rc.Flush(); err != nil {
			t.Errorf("Flush: %v", err)
		}
		if under.Flushed || under.Body.Len() != 0 {
			t.Errorf("Flush before the commit sent %q (flushed %v) to the client", under.Body.String(), under.Flushed)
		}
		if _, _, err := rc.Hijack(); !errors.Is(err, ErrHijackNotSupported) {
			t.Errorf("Hijack = %v, want ErrHijackNotSupported", err)
		}
		if u, ok := w.(interface{ Unwrap() http.ResponseWriter }); !ok || u.Unwrap() != http.ResponseWriter(under) {
			t.Error("Unwrap does not return the underlying writer")
		}
		fmt.Fprint(w, " and the rest")
	}))
	req := httptest.NewRequest(http.MethodPut, "/", nil)
	req.Header.Set(HeaderToken, "3")
	req.Header.Set(HeaderResource, "r")
	h.ServeHTTP(under, req)
	if under.Code != 200 || under.Body.String() != "partial and the rest" || store.LastToken("r") != 3 {
		t.Fatalf("after the commit: %d %q, last token %d", under.Code, under.Body.String(), store.LastToken("r"))
	}
}

// Through a real server, http.ResponseController reaches the connection's
// deadlines via Unwrap.
func TestResponseControllerDeadlines(t *testing.T) {
	var store MemoryStore
	srv := httptest.NewServer(Middleware(&store, Options{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Errorf("SetWriteDeadline through the fenced writer: %v", err)
		}
	})))
	defer srv.Close()
	resp, err := (&http.Client{Transport: &Transport{Lease: staticToken(1), Resource: "r"}}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

// spyWriter records what reaches the real connection.
type spyWriter struct {
	header http.Header
	codes  []int
	body   strings.Builder
}

func (s *spyWriter) Header() http.Header {
	if s.header == nil {
		s.header = http.Header{}
	}
	return s.header
}
func (s *spyWriter) WriteHeader(code int)        { s.codes = append(s.codes, code) }
func (s *spyWriter) Write(p []byte) (int, error) { return s.body.Write(p) }

// Every 1xx but 101 — 100 and 199 at the edges — is passed on and is not
// final; any 2xx, 299 included, commits.
func TestInformationalStatusesAreNotFinal(t *testing.T) {
	var store MemoryStore
	h := Middleware(&store, Options{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusContinue)
		w.WriteHeader(199)
		w.WriteHeader(299)
		fmt.Fprint(w, "done")
	}))
	req := httptest.NewRequest(http.MethodPut, "/", nil)
	req.Header.Set(HeaderToken, "5")
	req.Header.Set(HeaderResource, "r")
	var spy spyWriter
	h.ServeHTTP(&spy, req)
	if fmt.Sprint(spy.codes) != "[100 199 299]" || spy.body.String() != "done" {
		t.Fatalf("sent statuses %v body %q; want [100 199 299] \"done\"", spy.codes, spy.body.String())
	}
	if got := store.LastToken("r"); got != 5 {
		t.Fatalf("last token %d; want 5 (299 commits)", got)
	}
}
