// Package suite is the test suite every transactional httpguard Store runs
// against its real database: a real httptest server with the middleware, a
// handler that writes a data row inside the guard transaction.
package suite

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/httpguard"
)

// Backend adapts one Store and its database to the suite.
type Backend struct {
	Store httpguard.Store
	// Write writes value into resource's data row inside the request's
	// guard transaction, incrementing the row's seq; it returns the new seq.
	Write func(r *http.Request, resource, value string) (seq int64, err error)
	// Read returns the committed data row of resource ("" and 0 if none).
	Read func(resource string) (value string, seq int64, err error)
	// LastToken returns the guard's committed last token of resource.
	LastToken func(resource string) (fence.Token, error)
}

// Run runs the suite as subtests.
func Run(t *testing.T, b Backend) {
	srv := newServer(t, b, httpguard.Options{})
	s := &suite{b: b, url: srv.URL}
	t.Run("StaleGets409AndChangesNothing", s.stale)
	t.Run("BadHeaderGets400", s.badHeader)
	t.Run("HandlerFailureRollsBackDataAndToken", s.rollback)
	t.Run("ConcurrentWritersHistory", s.concurrent)
	t.Run("RetryOfAppliedOpReplaysAfterNewerToken", s.opReplay)
	RunSigned(t, b)
}

// newServer serves the middleware with opts over b's Store and a handler
// that writes the request body into the resource's data row.
func newServer(t *testing.T, b Backend, opts httpguard.Options) *httptest.Server {
	srv := httptest.NewServer(httpguard.Middleware(b.Store, opts)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, _ := httpguard.FromContext(r.Context())
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		seq, err := b.Write(r, f.Resource, string(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if string(body) == "fail" { // wrote, then failed: must roll back
			http.Error(w, "handler failed after writing", http.StatusUnprocessableEntity)
			return
		}
		fmt.Fprint(w, seq)
	})))
	t.Cleanup(srv.Close)
	return srv
}

type suite struct {
	b   Backend
	url string
}

type lease fence.Token

func (l lease) Token() fence.Token { return fence.Token(l) }

// send PUTs value to resource with token and returns the status and body.
func (s *suite) send(t *testing.T, resource string, tok fence.Token, value string) (int, string) {
	t.Helper()
	code, body, _ := s.sendOp(t, resource, tok, value, "")
	return code, body
}

// sendOp PUTs value to resource with token and op_id ("" sends none) and
// returns the status, body and whether the answer was replayed.
func (s *suite) sendOp(t *testing.T, resource string, tok fence.Token, value, opID string) (int, string, bool) {
	t.Helper()
	c := &http.Client{Transport: &httpguard.Transport{Lease: lease(tok), Resource: resource}}
	req, _ := http.NewRequestWithContext(httpguard.WithOpID(t.Context(), opID), http.MethodPut, s.url, strings.NewReader(value))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("PUT: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("PUT: reading the answer: %v", err)
	}
	return resp.StatusCode, string(body), resp.Header.Get(httpguard.HeaderReplayed) == "true"
}

// A retry of an applied op gets the saved answer, without applying again —
// also after a newer token was accepted (the replay decides first, as in the
// guards' Do and guard/redis). Another request under the op_id conflicts; a
// new op with a stale token is refused; a failed op is not remembered.
func (s *suite) opReplay(t *testing.T) {
	if code, body, replayed := s.sendOp(t, "op-r", 2, "a", "op-1"); code != 200 || body != "1" || replayed {
		t.Fatalf("first attempt: %d %q replayed=%v", code, body, replayed)
	}
	if code, body := s.send(t, "op-r", 3, "b"); code != 200 || body != "2" {
		t.Fatalf("newer owner: %d %q", code, body)
	}
	if code, body, replayed := s.sendOp(t, "op-r", 2, "a", "op-1"); code != 200 || body != "1" || !replayed {
		t.Fatalf("retry of the applied op after a newer token: %d %q replayed=%v; want its saved answer 200 \"1\", replayed", code, body, replayed)
	}
	s.want(t, "op-r", "b", 2, 3)
	code, body, _ := s.sendOp(t, "op-r", 2, "other", "op-1")
	var ref httpguard.Refusal
	if err := json.Unmarshal([]byte(body), &ref); err != nil || code != http.StatusConflict || ref.Reason != fence.ReasonOpConflict {
		t.Fatalf("another body under op-1: %d %q; want 409 OP_CONFLICT", code, body)
	}
	code, body, _ = s.sendOp(t, "op-r", 2, "c", "op-2")
	if err := json.Unmarshal([]byte(body), &ref); err != nil || code != http.StatusConflict || ref.Reason != fence.ReasonStaleToken || ref.LastAccepted != 3 {
		t.Fatalf("a new op with a stale token: %d %q; want 409 STALE_TOKEN", code, body)
	}
	for i := 0; i < 2; i++ {
		if code, _, replayed := s.sendOp(t, "op-r", 4, "fail", "op-3"); code != http.StatusUnprocessableEntity || replayed {
			t.Fatalf("failing op, attempt %d: %d replayed=%v; want the handler's 422 each time", i, code, replayed)
		}
	}
	s.want(t, "op-r", "b", 2, 3)
	if code, body, replayed := s.sendOp(t, "op-r", 4, "d", "op-4"); code != 200 || body != "3" || replayed {
		t.Fatalf("a new op: %d %q replayed=%v", code, body, replayed)
	}
	s.want(t, "op-r", "d", 3, 4)
}

func (s *suite) want(t *testing.T, resource, value string, seq int64, tok fence.Token) {
	t.Helper()
	v, n, err := s.b.Read(resource)
	if err != nil {
		t.Fatal(err)
	}
	last, err := s.b.LastToken(resource)
	if err != nil {
		t.Fatal(err)
	}
	if v != value || n != seq || last != tok {
		t.Fatalf("%s: data {%q, seq %d}, last token %d; want {%q, seq %d}, token %d", resource, v, n, last, value, seq, tok)
	}
}

func (s *suite) stale(t *testing.T) {
	if code, body := s.send(t, "sku-42", 2, "8"); code != 200 || body != "1" {
		t.Fatalf("B's write: %d %q", code, body)
	}
	code, body := s.send(t, "sku-42", 1, "5")
	var ref httpguard.Refusal
	if err := json.Unmarshal([]byte(body), &ref); err != nil || code != http.StatusConflict ||
		ref.Reason != fence.ReasonStaleToken || ref.Token != 1 || ref.LastAccepted != 2 || ref.Resource != "sku-42" ||
		ref.Message != "token 1 is older than accepted token 2" {
		t.Fatalf("A's late write: %d %q", code, body)
	}
	s.want(t, "sku-42", "8", 1, 2)
	if code, _ := s.send(t, "sku-42", 2, "9"); code != 200 {
		t.Fatalf("equal token: %d", code)
	}
	if code, _ := s.send(t, "sku-42", 3, "10"); code != 200 {
		t.Fatalf("newer token: %d", code)
	}
	s.want(t, "sku-42", "10", 3, 3)
}

func (s *suite) badHeader(t *testing.T) {
	req, _ := http.NewRequest(http.MethodPut, s.url, strings.NewReader("1"))
	req.Header.Set(httpguard.HeaderResource, "bad")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ref httpguard.Refusal
	if err := json.NewDecoder(resp.Body).Decode(&ref); err != nil {
		t.Fatalf("missing token: %d, body is not a refusal: %v", resp.StatusCode, err)
	}
	if resp.StatusCode != 400 || ref.Field != httpguard.HeaderToken {
		t.Fatalf("missing token: %d %+v", resp.StatusCode, ref)
	}
	s.want(t, "bad", "", 0, 0)
}

func (s *suite) rollback(t *testing.T) {
	s.send(t, "r", 2, "ok")
	if code, body := s.send(t, "r", 5, "fail"); code != http.StatusUnprocessableEntity {
		t.Fatalf("failing handler: %d %q", code, body)
	}
	s.want(t, "r", "ok", 1, 2)
	if code, _ := s.send(t, "r", 3, "three"); code != 200 {
		t.Fatalf("token 3 after the rollback of 5: %d", code)
	}
	s.want(t, "r", "three", 2, 3)
}

// 32 clients with interleaved newer and older tokens on one resource. Each
// accepted write returns the data row's seq, which the database assigns
// under the guard's lock: in seq order the tokens never decrease, and the
// final row is the write of the largest token.
func (s *suite) concurrent(t *testing.T) {
	type write struct {
		seq   int64
		token fence.Token
		value string
	}
	var (
		mu      sync.Mutex
		history []write
		refused int
		wg      sync.WaitGroup
	)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 6; i++ {
				tok := fence.Token(1 + i*3 + (w*7)%10)
				val := fmt.Sprintf("w%d-%d", w, i)
				code, body := s.send(t, "hot", tok, val)
				mu.Lock()
				switch code {
				case 200:
					seq, err := strconv.ParseInt(body, 10, 64)
					if err != nil {
						t.Errorf("body %q", body)
					}
					history = append(history, write{seq, tok, val})
				case http.StatusConflict:
					refused++
				default:
					t.Errorf("token %d: %d %s", tok, code, body)
				}
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	sort.Slice(history, func(i, j int) bool { return history[i].seq < history[j].seq })
	var max fence.Token
	for i, h := range history {
		if h.seq != int64(i+1) {
			t.Fatalf("seqs not gapless: position %d has seq %d", i, h.seq)
		}
		if h.token < max {
			t.Fatalf("seq %d accepted token %d after token %d", h.seq, h.token, max)
		}
		max = h.token
	}
	if refused == 0 || len(history) == 0 {
		t.Fatal(errors.New("interleaving did not exercise both outcomes"))
	}
	last := history[len(history)-1]
	s.want(t, "hot", last.value, last.seq, max)
	t.Logf("%d accepted, %d refused, final token %d", len(history), refused, max)
}
