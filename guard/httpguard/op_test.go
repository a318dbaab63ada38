package httpguard

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// MemoryStore remembers op answers: a retry of an applied op, sent after a
// newer token was accepted, gets the saved answer and the handler does not
// run again; another request under the op_id is a conflict.
func TestMemoryStoreReplaysOps(t *testing.T) {
	var (
		store MemoryStore
		calls atomic.Int32
	)
	srv := httptest.NewServer(Middleware(&store, Options{MaxBody: 10})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
		}
		w.Header().Set("X-Call", fmt.Sprint(n))
		status := http.StatusCreated
		if s, ok := strings.CutPrefix(string(body), "status="); ok {
			status, _ = strconv.Atoi(s)
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, "call %d wrote %s", n, body)
	})))
	defer srv.Close()
	send := func(tok fence.Token, op, body string) (*http.Response, string) {
		t.Helper()
		c := &http.Client{Transport: &Transport{Lease: staticToken(tok), Resource: "r"}}
		ctx := t.Context()
		if op != "" {
			ctx = WithOpID(ctx, op)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/orders?x=1", strings.NewReader(body))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}
	if resp, body := send(2, "op-1", "a"); resp.StatusCode != 201 || body != "call 1 wrote a" {
		t.Fatalf("first: %d %q", resp.StatusCode, body)
	}
	if resp, _ := send(3, "", "b"); resp.StatusCode != 201 {
		t.Fatalf("newer token: %d", resp.StatusCode)
	}
	resp, body := send(2, "op-1", "a")
	if resp.StatusCode != 201 || body != "call 1 wrote a" || resp.Header.Get("X-Call") != "1" || resp.Header.Get(HeaderReplayed) != "true" {
		t.Fatalf("retry after a newer token: %d %q %v; want call 1's answer, replayed", resp.StatusCode, body, resp.Header)
	}
	if calls.Load() != 2 || store.LastToken("r") != 3 {
		t.Fatalf("handler ran %d times, last token %d; want 2 and 3", calls.Load(), store.LastToken("r"))
	}
	var ref Refusal
	resp, body = send(2, "op-1", "z")
	if err := json.Unmarshal([]byte(body), &ref); err != nil || resp.StatusCode != 409 || ref.Reason != fence.ReasonOpConflict || ref.OpID != "op-1" {
		t.Fatalf("another body under op-1: %d %q", resp.StatusCode, body)
	}
	resp.Body = io.NopCloser(strings.NewReader(body))
	var conflict *fence.OpConflictError
	if err := ResponseError(resp); !errors.As(err, &conflict) || conflict.Field != "op_id" || conflict.ID != "op-1" {
		t.Fatalf("ResponseError of the conflict = %v; want *fence.OpConflictError for op-1", err)
	}
	resp, body = send(2, "op-2", "a")
	if err := json.Unmarshal([]byte(body), &ref); err != nil || resp.StatusCode != 409 || ref.Reason != fence.ReasonStaleToken {
		t.Fatalf("a new op with a stale token: %d %q", resp.StatusCode, body)
	}
	resp, body = send(3, "op-3", "12345678901")
	if err := json.Unmarshal([]byte(body), &ref); err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge || ref.Field != "body" {
		t.Fatalf("a body over MaxBody with an op_id: %d %q; want 413 naming body", resp.StatusCode, body)
	}
	if calls.Load() != 2 {
		t.Fatalf("handler ran %d times, want 2", calls.Load())
	}
	// The edges: a body of exactly MaxBody (10) bytes is taken; answers 200
	// and 299 are replayed as they were.
	for i, body := range []string{"status=200", "status=299"} {
		op := fmt.Sprintf("op-edge-%d", i)
		first, firstBody := send(3, op, body)
		again, againBody := send(3, op, body)
		if first.StatusCode != again.StatusCode || firstBody != againBody || again.Header.Get(HeaderReplayed) != "true" {
			t.Fatalf("%s (%q): first %d %q, retry %d %q replayed %q; want the same answer replayed",
				op, body, first.StatusCode, firstBody, again.StatusCode, againBody, again.Header.Get(HeaderReplayed))
		}
	}
}

// MemoryStore forgets an op's answer after OpRetention: a retry then runs
// the handler again (its token is still checked).
func TestMemoryStoreOpRetention(t *testing.T) {
	store := MemoryStore{OpRetention: time.Nanosecond}
	begin := func(id string) (bool, error) {
		tx, _, replayed, err := store.BeginOp(t.Context(), Op{Resource: "r", Token: 1, ID: id, Payload: []byte("p")})
		if err != nil || replayed {
			return replayed, err
		}
		if err := tx.SaveOp(t.Context(), []byte(`{"status":200}`)); err != nil {
			return false, err
		}
		return false, tx.Commit(t.Context())
	}
	for i := 0; i < 3; i++ {
		if replayed, err := begin("op-" + fmt.Sprint(i)); replayed || err != nil {
			t.Fatalf("op %d: replayed=%v err=%v", i, replayed, err)
		}
	}
	// Every answer is older than 1ns by now: the retry applies again, and
	// the expired answers are dropped.
	if replayed, err := begin("op-0"); replayed || err != nil {
		t.Fatalf("op-0 after its retention: replayed=%v err=%v; want applied again", replayed, err)
	}
	if res := store.resources["r"]; len(res.ops) != 1 || len(res.order) != 1 {
		t.Fatalf("after expiry: %d answers kept (%d in order), want only the new op-0", len(res.ops), len(res.order))
	}
	store.OpRetention = time.Hour
	if replayed, err := begin("op-9"); replayed || err != nil {
		t.Fatalf("op-9: replayed=%v err=%v", replayed, err)
	}
	if replayed, err := begin("op-9"); !replayed || err != nil {
		t.Fatalf("op-9 again within the hour: replayed=%v err=%v; want a replay", replayed, err)
	}
}
