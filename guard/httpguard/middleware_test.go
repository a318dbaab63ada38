package httpguard

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/fenceworks/fence"
)

// stockService is a tiny fenced service over a MemoryStore: PUT writes the
// body as the stock of the resource; a body "fail" makes the handler answer
// 500 after writing, "panic" makes it panic.
type stockService struct {
	store MemoryStore
	mu    sync.Mutex
	stock map[string]string // committed values (written inside the guard Tx)
}

func newStockServer(t *testing.T, opts Options) (*stockService, *httptest.Server) {
	s := &stockService{stock: map[string]string{}}
	h := Middleware(&s.store, opts)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := FromContext(r.Context())
		if !ok {
			t.Error("handler called without Fenced in its context")
		}
		body, _ := io.ReadAll(r.Body)
		switch string(body) {
		case "fail":
			http.Error(w, "handler failed", http.StatusInternalServerError)
			return
		case "panic":
			panic(http.ErrAbortHandler)
		}
		s.mu.Lock()
		s.stock[f.Resource] = string(body)
		s.mu.Unlock()
		w.Header().Set("X-Written-By", f.Token.String())
		fmt.Fprintf(w, "ok %s=%s op=%q\n", f.Resource, body, f.OpID)
	}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return s, srv
}

func put(t *testing.T, url string, headers map[string]string, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
	for k, v := range headers {
		req.Header.Add(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("PUT: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func fenced(res string, tok int) map[string]string {
	return map[string]string{HeaderResource: res, HeaderToken: fmt.Sprint(tok)}
}

func TestStaleRequestGets409WithBothTokens(t *testing.T) {
	s, srv := newStockServer(t, Options{})
	resp, body := put(t, srv.URL, fenced("sku-42", 2), "8")
	if resp.StatusCode != 200 || resp.Header.Get("X-Written-By") != "2" {
		t.Fatalf("B's write: %d %q", resp.StatusCode, body)
	}
	resp, body = put(t, srv.URL, fenced("sku-42", 1), "5")
	if resp.StatusCode != http.StatusConflict || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("A's late write: %d %q", resp.StatusCode, body)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"reason": "STALE_TOKEN", "resource": "sku-42", "token": 1.0, "last_accepted": 2.0,
		"message": "token 1 is older than accepted token 2"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("409 body = %v, want %v", got, want)
	}
	if s.stock["sku-42"] != "8" || s.store.LastToken("sku-42") != 2 {
		t.Fatalf("after the stale write: stock %q, last token %d", s.stock["sku-42"], s.store.LastToken("sku-42"))
	}
	if resp, _ := put(t, srv.URL, fenced("sku-42", 2), "9"); resp.StatusCode != 200 || s.stock["sku-42"] != "9" {
		t.Fatalf("equal token: %d", resp.StatusCode)
	}
}

func TestBadHeadersGet400NamingTheHeader(t *testing.T) {
	s, srv := newStockServer(t, Options{})
	for _, c := range []struct {
		name    string
		headers map[string]string
		field   string
	}{
		{"no token", map[string]string{HeaderResource: "r"}, HeaderToken},
		{"garbage token", map[string]string{HeaderResource: "r", HeaderToken: "abc"}, HeaderToken},
		{"token 0", fenced("r", 0), HeaderToken},
		{"negative token", map[string]string{HeaderResource: "r", HeaderToken: "-1"}, HeaderToken},
		{"plus token", map[string]string{HeaderResource: "r", HeaderToken: "+5"}, HeaderToken},
		{"token 2^53", map[string]string{HeaderResource: "r", HeaderToken: "9007199254740992"}, HeaderToken},
		{"token overflows", map[string]string{HeaderResource: "r", HeaderToken: "99999999999999999999999"}, HeaderToken},
		{"no resource", map[string]string{HeaderToken: "3"}, HeaderResource},
		{"long resource", fenced(strings.Repeat("x", 513), 3), HeaderResource},
		{"long op id", map[string]string{HeaderResource: "r", HeaderToken: "3", HeaderOpID: strings.Repeat("o", 257)}, HeaderOpID},
		{"signed token, three parts", map[string]string{HeaderResource: "r", HeaderToken: "3.prod.kid"}, HeaderToken},
		{"signed token, short signature", map[string]string{HeaderResource: "r", HeaderToken: "3.prod.kid.AAAA"}, HeaderToken},
		{"signed token, token 0", map[string]string{HeaderResource: "r", HeaderToken: "0.prod.kid." + strings.Repeat("A", 86)}, HeaderToken},
	} {
		resp, body := put(t, srv.URL, c.headers, "1")
		var ref Refusal
		_ = json.Unmarshal([]byte(body), &ref)
		if resp.StatusCode != 400 || ref.Reason != fence.ReasonInvalid || ref.Field != c.field || ref.Bound == "" {
			t.Errorf("%s: %d %s; want 400 INVALID_ARGUMENT naming %s", c.name, resp.StatusCode, body, c.field)
		}
	}
	// A header sent twice is refused too.
	req, _ := http.NewRequest(http.MethodPut, srv.URL, strings.NewReader("1"))
	req.Header.Add(HeaderResource, "r")
	req.Header.Add(HeaderToken, "3")
	req.Header.Add(HeaderToken, "4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("two tokens: %d", resp.StatusCode)
	}
	if len(s.stock) != 0 || s.store.MaxToken() != 0 {
		t.Fatalf("a refused request reached the handler or the store: %v, %d", s.stock, s.store.MaxToken())
	}
}

// A handler that fails (non-2xx) or panics rolls the token back, and the
// resource is free for the next request.
func TestHandlerFailureRollsBack(t *testing.T) {
	s, srv := newStockServer(t, Options{})
	put(t, srv.URL, fenced("r", 2), "8")
	resp, body := put(t, srv.URL, fenced("r", 5), "fail")
	if resp.StatusCode != 500 || !strings.Contains(body, "handler failed") {
		t.Fatalf("failing handler: %d %q; want its own 500 passed through", resp.StatusCode, body)
	}
	if got := s.store.LastToken("r"); got != 2 {
		t.Fatalf("last token after a failed handler = %d, want 2 (rolled back)", got)
	}
	req, _ := http.NewRequest(http.MethodPut, srv.URL, strings.NewReader("panic"))
	for k, v := range fenced("r", 6) {
		req.Header.Set(k, v)
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("panicking handler answered %d", resp.StatusCode)
	}
	if got := s.store.LastToken("r"); got != 2 {
		t.Fatalf("last token after a panic = %d, want 2", got)
	}
	// Token 3 is still accepted: 5 and 6 were never committed.
	if resp, body := put(t, srv.URL, fenced("r", 3), "7"); resp.StatusCode != 200 || s.store.LastToken("r") != 3 {
		t.Fatalf("token 3 after rollbacks: %d %q", resp.StatusCode, body)
	}
}

func TestServerDecidesTheResource(t *testing.T) {
	s, srv := newStockServer(t, Options{Resource: func(r *http.Request) string { return "stock" + r.URL.Path }})
	if resp, body := put(t, srv.URL+"/a", map[string]string{HeaderToken: "2"}, "1"); resp.StatusCode != 200 || s.stock["stock/a"] != "1" {
		t.Fatalf("no resource header: %d %q", resp.StatusCode, body)
	}
	resp, body := put(t, srv.URL+"/a", fenced("stock/b", 2), "2")
	var ref Refusal
	_ = json.Unmarshal([]byte(body), &ref)
	if resp.StatusCode != 400 || ref.Field != HeaderResource {
		t.Fatalf("mismatched resource header: %d %q", resp.StatusCode, body)
	}
}

// 32 clients with interleaved newer and older tokens hammer one resource.
// The handler records, while it runs, how many handlers are inside at once
// and the order of committed tokens.
func TestConcurrentRequestsSerialisedPerResource(t *testing.T) {
	var (
		store   MemoryStore
		mu      sync.Mutex
		inside  int
		overlap bool
		history []fence.Token
	)
	h := Middleware(&store, Options{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, _ := FromContext(r.Context())
		mu.Lock()
		inside++
		overlap = overlap || inside > 1
		history = append(history, f.Token) // the handler's "write"
		inside--
		mu.Unlock()
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	var wg sync.WaitGroup
	var refused, accepted sync.Map
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c := &http.Client{Transport: &Transport{Lease: nil, Resource: "hot"}}
			for i := 0; i < 10; i++ {
				tok := fence.Token(1 + i*3 + (w*5)%11)
				c.Transport.(*Transport).Lease = staticToken(tok)
				resp, err := c.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				err = ResponseError(resp)
				resp.Body.Close()
				var stale *fence.StaleTokenError
				switch {
				case err == nil:
					accepted.Store(tok, true)
				case errors.As(err, &stale) && stale.LastAccepted > tok:
					refused.Store(tok, true)
				default:
					t.Errorf("token %d: %v", tok, err)
				}
			}
		}(w)
	}
	wg.Wait()
	if overlap {
		t.Fatal("two handlers ran at once on one resource")
	}
	var max fence.Token
	for i, tok := range history {
		if tok < max {
			t.Fatalf("write %d has token %d after token %d was committed", i, tok, max)
		}
		max = tok
	}
	if store.LastToken("hot") != max {
		t.Fatalf("last token %d, max committed %d", store.LastToken("hot"), max)
	}
	n := 0
	refused.Range(func(any, any) bool { n++; return true })
	if n == 0 || len(history) == 0 {
		t.Fatalf("the interleaving did not exercise both outcomes: %d accepted, %d refused tokens", len(history), n)
	}
}

type staticToken fence.Token

func (s staticToken) Token() fence.Token { return fence.Token(s) }
