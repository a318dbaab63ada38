package client_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// A lock that is free but held back by a waiting set (strict FIFO: the set
// keeps its place on it while it waits for its other lock) refuses a try as
// BUSY that says so, over the wire: the Go client's *fence.BusyError has
// Queued and no holder, and a JSON caller (curl) gets facts.queued and the
// message — not "held by "" (token 0)".
func TestTryOnAFreeLockBehindAQueueIsBusyQueued(t *testing.T) {
	ctx := ctxFor(t)
	c := newClient(t)
	a, b := uniq(t)+"/a", uniq(t)+"/b"
	held, err := c.Acquire(ctx, a, client.TTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	events, err := c.Watch(ctx, b, client.WatchName())
	if err != nil {
		t.Fatal(err)
	}
	<-events // the state
	setDone := make(chan error, 1)
	go func() {
		l, err := c.AcquireSet(ctx, []fence.LockSpec{{Name: a}, {Name: b}}, client.TTL(30*time.Second), client.Wait(time.Minute))
		if err == nil {
			err = l.Release(ctx)
		}
		setDone <- err
	}()
	for ev := range events { // the set is queued on b
		if ev.Err != nil {
			t.Fatal(ev.Err)
		}
		if ev.Change != nil && ev.Change.Kind == "queued" {
			break
		}
	}

	_, err = c.Acquire(ctx, b, client.TTL(time.Second))
	var busy *fence.BusyError
	if !errors.As(err, &busy) || busy.Name != b || busy.Queued != 1 || busy.Holder != "" || busy.Token != 0 || busy.Delayed {
		t.Fatalf("try on %s: %v (%+v), want BUSY free with 1 queued request ahead", b, err, busy)
	}
	msg := `is free but 1 queued request(s) come first`
	if !strings.Contains(err.Error(), msg) {
		t.Fatalf("try on %s: %q, want it to say %q", b, err, msg)
	}

	body, _ := json.Marshal(map[string]any{"name": b, "owner": "curl", "ttl": "5s"})
	resp, err := http.Post(serverURL+"/fence.v1.LockService/Acquire", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var out struct {
		Reason  string         `json:"reason"`
		Message string         `json:"message"`
		Facts   map[string]any `json:"facts"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%d %s: %v", resp.StatusCode, raw, err)
	}
	if resp.StatusCode != http.StatusTooManyRequests || out.Reason != "BUSY" || out.Facts["queued"] != float64(1) ||
		out.Facts["holder"] != nil || out.Facts["holderToken"] != nil || !strings.Contains(out.Message, msg) {
		t.Fatalf("JSON try on %s: %d %s, want 429 BUSY with facts.queued 1, no holder, and the message", b, resp.StatusCode, raw)
	}

	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-setDone; err != nil {
		t.Fatalf("the set after a's release: %v", err)
	}
}
