//go:build e2e

package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// The lock boundaries from the CLI against a real server (needs the
// state's sets, modes and permits, issue 23): a set taken with one token
// and a proof per lock; shared holders side by side and an exclusive try
// busy; permits up to N and another N refused (exit 4, PERMITS_MISMATCH);
// fence locks shows every holder; fence run gives a set's names and proofs.
func TestProcessLockBoundaries(t *testing.T) {
	srv := startServe(t)
	r := fenceRun(t, srv.url, "--json", "acquire", "sku/2", "sku/1", "--shared-lock", "catalog", "--ttl", "30s").want(t, exitOK, "acquire a set")
	var set acquireJSON
	if err := json.Unmarshal([]byte(r.stdout), &set); err != nil {
		t.Fatal(err)
	}
	if set.Name != "catalog" || len(set.Locks) != 3 || set.Locks[0] != (lockSpecJSON{Name: "catalog", Mode: "shared"}) ||
		set.Locks[1].Name != "sku/1" || len(set.Proofs) != 3 || set.Proofs[0] != set.SignedToken {
		t.Fatalf("set acquire --json = %s", r.stdout)
	}
	fenceRun(t, srv.url, "acquire", "sku/1", "--ttl", "30s").want(t, exitBusy, "sku/1 is the set's")
	fenceRun(t, srv.url, "acquire", "catalog", "--shared", "--ttl", "30s").want(t, exitOK, "catalog shared beside the set")
	fenceRun(t, srv.url, "acquire", "catalog", "--ttl", "30s").want(t, exitBusy, "catalog exclusive while shared")

	fenceRun(t, srv.url, "acquire", "exchange", "--permits", "2", "--ttl", "30s").want(t, exitOK, "permit 1 of 2")
	fenceRun(t, srv.url, "acquire", "exchange", "--permits", "2", "--ttl", "30s").want(t, exitOK, "permit 2 of 2")
	fenceRun(t, srv.url, "acquire", "exchange", "--permits", "2", "--ttl", "30s").want(t, exitBusy, "no third permit")
	mm := fenceRun(t, srv.url, "--json", "acquire", "exchange", "--permits", "3", "--ttl", "30s").want(t, exitRefused, "another permit count")
	if !strings.Contains(mm.stdout+mm.stderr, "PERMITS_MISMATCH") {
		t.Fatalf("another permit count: %s %s, want PERMITS_MISMATCH", mm.stdout, mm.stderr)
	}

	ls := fenceRun(t, srv.url, "--json", "locks").want(t, exitOK, "locks")
	var page struct {
		Locks []lockJSON `json:"locks"`
	}
	if err := json.Unmarshal([]byte(ls.stdout), &page); err != nil {
		t.Fatal(err)
	}
	held := map[string]lockJSON{}
	for _, l := range page.Locks {
		held[l.Name] = l
	}
	if c := held["catalog"]; len(c.Holders) != 2 {
		t.Fatalf("catalog: %+v, want two shared holders (the set's lease and the lone one)", c)
	}
	if x := held["exchange"]; len(x.Holders) != 2 || x.Permits != 2 {
		t.Fatalf("exchange: %+v, want 2 holders of 2 permits", x)
	}
	human := fenceRun(t, srv.url, "locks", "exchange").want(t, exitOK, "locks exchange").stdout
	if strings.Count(human, "exchange") != 2 || !strings.Contains(human, "permits 2") {
		t.Fatalf("fence locks exchange:\n%s\nwant a row per permit holder", human)
	}

	run := fenceRun(t, srv.url, "run", "job/b", "job/a", "--ttl", "5s", "--", "sh", "-c", `echo "$FENCE_LOCK $FENCE_LOCKS $FENCE_PROOFS"`).want(t, exitOK, "run a set")
	fields := strings.Fields(run.stdout)
	var proofs []string
	if len(fields) != 3 || fields[0] != "job/a" || fields[1] != `["job/a","job/b"]` || json.Unmarshal([]byte(fields[2]), &proofs) != nil || len(proofs) != 2 {
		t.Fatalf("run of a set: child saw %q", run.stdout)
	}
}
