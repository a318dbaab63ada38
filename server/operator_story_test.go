package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// postAsync posts a plain JSON call from another goroutine (no testing.T):
// the reply's body, or the error.
func postAsync(url, proc, auth, body string) <-chan map[string]any {
	done := make(chan map[string]any, 1)
	go func() {
		out := map[string]any{}
		req, _ := http.NewRequest(http.MethodPost, url+proc, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out["_err"] = err.Error()
			done <- out
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(b, &out)
		out["_status"], out["_raw"] = resp.StatusCode, string(b)
		done <- out
	}()
	return done
}

// The paused-worker story, as LockStory tells it: A's grant, A's release,
// the hand-off to B (who waited), B's write accepted, and A's late write
// refused with A's token beside B's — under the lock's name, to a reader
// of it only.
func TestLockStoryTellsTheHandOffAndTheStaleWriteWithBothTokens(t *testing.T) {
	t.Parallel()
	f := newOperatorFixture(t, nil)
	jobs := f.creds["jobs"]
	a := f.must(fencev1connect.LockServiceAcquireProcedure, jobs, `{"name":"jobs/x","owner":"A","ttl":"60s"}`)
	t1 := num(a["lease"].(map[string]any)["token"])
	waiting := postAsync(f.url, fencev1connect.LockServiceAcquireProcedure, jobs, `{"name":"jobs/x","owner":"B","ttl":"60s","wait":"60s"}`)
	// B is queued before A releases (else B's is a plain grant).
	deadline := time.Now().Add(30 * time.Second)
	for {
		g := f.must(fencev1connect.LockServiceGetProcedure, jobs, `{"name":"jobs/x"}`)
		if num(g["lock"].(map[string]any)["waiters"]) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B never queued: %s", g["_raw"])
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline: no event to wait on
	}
	f.must(fencev1connect.LockServiceReleaseProcedure, jobs, fmt.Sprintf(`{"name":"jobs/x","token":%d}`, t1))
	b := <-waiting
	if b["_status"] != http.StatusOK {
		t.Fatalf("B's acquire: %v %v", b["_status"], b["_raw"])
	}
	t2 := num(b["lease"].(map[string]any)["token"])
	f.must(fencev1connect.ResourceServiceWriteProcedure, jobs, fmt.Sprintf(`{"resource":"jobs/x","token":%d,"text":"B"}`, t2))
	f.refused(fencev1connect.ResourceServiceWriteProcedure, jobs, fmt.Sprintf(`{"resource":"jobs/x","token":%d,"text":"A"}`, t1), http.StatusBadRequest, "STALE_TOKEN")

	story := f.must(fencev1connect.OperatorServiceLockStoryProcedure, f.creds["mixed"], `{"name":"jobs/x"}`)
	events := objects(story["events"])
	var kinds []string
	for _, e := range events {
		kinds = append(kinds, fmt.Sprint(e["kind"]))
	}
	if want := []string{"grant", "release", "handoff", "write", "refused_stale"}; !slices.Equal(kinds, want) {
		t.Fatalf("story kinds %v, want %v: %s", kinds, want, story["_raw"])
	}
	for i, want := range []struct {
		token uint64
		owner string
	}{{t1, "A"}, {t1, "A"}, {t2, "B"}} {
		if e := events[i]; num(e["token"]) != want.token || e["owner"] != want.owner || e["mode"] != "exclusive" {
			t.Errorf("event %d (%s): %v; want token %d owner %s mode exclusive", i, kinds[i], e, want.token, want.owner)
		}
	}
	if w := events[3]; num(w["token"]) != t2 {
		t.Errorf("the accepted write: %v, want token %d", w, t2)
	}
	if r := events[4]; num(r["refusedToken"]) != t1 || num(r["acceptedToken"]) != t2 {
		t.Errorf("the refusal: %v; want refusedToken %d beside acceptedToken %d", r, t1, t2)
	}
	var last uint64
	for i, e := range events {
		if num(e["logIndex"]) < last || num(e["atUnixMs"]) == 0 {
			t.Errorf("event %d: logIndex %v atUnixMs %v (log indexes must not go back; times set)", i, e["logIndex"], e["atUnixMs"])
		}
		last = num(e["logIndex"])
	}

	// Read on the name is needed: other may read other/ only.
	f.refused(fencev1connect.OperatorServiceLockStoryProcedure, f.creds["other"], `{"name":"jobs/x"}`, http.StatusForbidden, "PERMISSION_DENIED")
	f.refused(fencev1connect.OperatorServiceLockStoryProcedure, "", `{"name":"jobs/x"}`, http.StatusUnauthorized, "UNAUTHENTICATED")
	f.invalidField(fencev1connect.OperatorServiceLockStoryProcedure, f.creds["admin"], `{"name":""}`, "name")
	f.invalidField(fencev1connect.OperatorServiceLockStoryProcedure, f.creds["admin"], fmt.Sprintf(`{"name":%q}`, strings.Repeat("n", 2000)), "name")
	if got := objects(f.must(fencev1connect.OperatorServiceLockStoryProcedure, f.creds["admin"], `{"name":"jobs/x"}`)["events"]); len(got) != len(events) {
		t.Errorf("the admin sees %d events, the reader %d", len(got), len(events))
	}
}
