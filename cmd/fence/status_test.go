//go:build e2e

package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fenceworks/fence/guard/sqlite"
	"github.com/fenceworks/fence/testkit/testutil"
)

// statusKeys are the --json keys of one node: every NodeStatus field, and
// the URL asked.
var statusKeys = []string{"url", "id", "clusterId", "raftAddr", "role", "leaderId", "leaderAddr", "lastContact", "ready",
	"term", "commitIndex", "appliedIndex", "lastToken", "sessions", "leasesHeld", "waiters", "queued", "serverTime",
	"slack", "oldestIdAge", "resources", "resourceBytes", "dataDirBytes", "fatal", "version", "insecureListen",
	"rememberedOpIds", "rememberedRequestIds", "idMemoryNearCap", "snapshotBytes"}

// statusTextKeys are the keys of the text form, in order.
var statusTextKeys = []string{"node id", "cluster id", "raft addr", "role", "leader", "last contact", "ready", "term",
	"commit index", "applied index", "last token", "sessions", "leases held", "waiters", "queued", "server time",
	"slack", "oldest id age", "remembered ids", "snapshot size", "resources", "resource bytes", "data dir size", "fatal", "version", "insecure listen"}

// fence status against a single node prints every field, aligned, in text
// and --json (the same facts both ways); with an unreachable server in the
// list, the others are still printed and the exit code is 1.
func TestProcessStatusSingleNode(t *testing.T) {
	srv := startServe(t)
	tok := tokenOf(t, fenceRun(t, srv.url, "acquire", "s-lock", "--ttl", "1h").want(t, exitOK, "acquire").stdout)
	fenceRun(t, srv.url, "write", "s-res", "--token", strconv.FormatUint(tok, 10), "--value", "abc").want(t, exitOK, "write")

	out := fenceRun(t, srv.url, "status").want(t, exitOK, "fence status").stdout
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var keys []string
	col := -1
	text := map[string]string{}
	for _, l := range lines {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			t.Fatalf("fence status line %q is not key: value\n%s", l, out)
		}
		keys = append(keys, k)
		at := len(l) - len(strings.TrimLeft(v, " "))
		if col >= 0 && at != col {
			t.Errorf("fence status values not aligned (line %q)\n%s", l, out)
		}
		col = at
		text[k] = strings.TrimSpace(v)
	}
	if !slices.Equal(keys, statusTextKeys) {
		t.Fatalf("fence status keys %q, want %q", keys, statusTextKeys)
	}
	for k, want := range map[string]string{"role": "leader", "ready": "true", "last token": strconv.FormatUint(tok, 10),
		"leases held": "1", "resources": "1", "resource bytes": "3 B", "sessions": "0", "raft addr": "-", "fatal": "-",
		"leader": text["node id"], "last contact": "-", "insecure listen": "no", "remembered ids": "1 op_ids, 0 request_ids"} { // fence write sends an op_id {
		if text[k] != want {
			t.Errorf("fence status %s: %q, want %q", k, text[k], want)
		}
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(text["cluster id"]) {
		t.Errorf("cluster id %q: want the UUID the first leader recorded", text["cluster id"])
	}
	if !regexp.MustCompile(`^\d+(\.\d)? [KMG]?i?B \(\d+ bytes\)$`).MatchString(text["data dir size"]) {
		t.Errorf("data dir size %q: want human and bytes", text["data dir size"])
	}

	j := fenceRun(t, srv.url, "status", "--json").want(t, exitOK, "fence status --json").stdout
	var o map[string]any
	if err := json.Unmarshal([]byte(j), &o); err != nil {
		t.Fatalf("fence status --json: %v\n%s", err, j)
	}
	if got := slices.Sorted(maps.Keys(o)); !slices.Equal(got, slices.Sorted(slices.Values(statusKeys))) {
		t.Errorf("fence status --json keys %q, want %q", got, slices.Sorted(slices.Values(statusKeys)))
	}
	if o["url"] != srv.url || o["role"] != "leader" || o["lastToken"] != float64(tok) || o["leasesHeld"] != 1.0 ||
		o["resourceBytes"] != 3.0 || o["ready"] != true || o["id"] != text["node id"] || o["clusterId"] != text["cluster id"] || o["term"] != mustFloat(t, text["term"]) {
		t.Errorf("fence status --json disagrees with the text or the facts:\n%s\n%s", j, out)
	}
	if b, _ := o["dataDirBytes"].(float64); b <= 0 {
		t.Errorf("dataDirBytes %v, want > 0", o["dataDirBytes"])
	}

	dead := "http://" + testutil.FreeAddr(t)
	r := fenceRun(t, dead+","+srv.url, "status", "--json")
	if r.code != exitError {
		t.Errorf("fence status with an unreachable server: exit %d, want %d", r.code, exitError)
	}
	var objs []map[string]any
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("%v in %q", err, r.stdout)
		}
		objs = append(objs, m)
	}
	if len(objs) != 2 || objs[0]["url"] != dead || objs[0]["error"] == nil || objs[1]["url"] != srv.url || objs[1]["role"] != "leader" {
		t.Errorf("fence status --json with %s dead: want its error, then the live node:\n%s", dead, r.stdout)
	}
	if !strings.Contains(r.stderr, dead) {
		t.Errorf("stderr does not name the unreachable server: %q", r.stderr)
	}
	r = fenceRun(t, dead+","+srv.url, "status")
	if r.code != exitError || !strings.Contains(r.stdout, "== "+srv.url+" ==") || !strings.Contains(r.stdout, "role:") {
		t.Errorf("fence status (text) with %s dead: exit %d, want %d and the live node printed:\n%s", dead, r.code, exitError, r.stdout)
	}
	fenceRun(t, srv.url, "status", "extra").want(t, exitUsage, "fence status extra")
}

// Under authentication NodeStatus shows a principal that is not an admin
// only role and ready: fence status with its token prints those two and
// says the rest needs an admin token, and --json holds only url, role and
// ready — not the absent fields as zeros (term: 0, last token: 0, an
// outside attack's finding); an admin's token still prints every field.
func TestProcessStatusNonAdminToken(t *testing.T) {
	srv := startServe(t)
	_, admin := secretOf(t, fenceRun(t, srv.url, "auth", "bootstrap", "--json").want(t, exitOK, "bootstrap"))
	as := func(secret string, args ...string) result {
		return fenceRun(t, srv.url, append([]string{"--auth-token", secret}, args...)...)
	}
	as(admin, "role", "grant", "app", "lock:jobs/").want(t, exitOK, "role grant")
	_, app := secretOf(t, as(admin, "token", "create", "--role", "app", "--json").want(t, exitOK, "token create"))
	as(admin, "auth", "enable").want(t, exitOK, "enable")
	as(app, "acquire", "jobs/x", "--ttl", "1h").want(t, exitOK, "acquire") // a token above 0 the view must not show

	out := as(app, "status").want(t, exitOK, "fence status with an app token").stdout
	want := "role:         leader\nready:        true\nother fields: need an admin token (this token's principal is shown only role and ready)\n"
	if out != want {
		t.Errorf("fence status with an app token:\n%s\nwant:\n%s", out, want)
	}
	j := as(app, "status", "--json").want(t, exitOK, "fence status --json with an app token").stdout
	var o map[string]any
	if err := json.Unmarshal([]byte(j), &o); err != nil {
		t.Fatalf("fence status --json: %v\n%s", err, j)
	}
	if len(o) != 3 || o["url"] != srv.url || o["role"] != "leader" || o["ready"] != true {
		t.Errorf("fence status --json with an app token: %s, want only url, role and ready", j)
	}

	// fence guard max-token compares with the cluster's last token: the
	// app token's view has none (it read 0 and warned of a forged token).
	path := filepath.Join(t.TempDir(), "guard.sqlite")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := sqlite.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlite.Check(ctx, tx, "jobs/x", 1); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	mt := as(app, "guard", "max-token", "--sqlite", path).want(t, exitOK, "guard max-token with an app token")
	if strings.Contains(mt.stderr, "WARNING") || !strings.Contains(mt.stderr, "not compared with the cluster's last token") || !strings.Contains(mt.stderr, "needs an admin token") {
		t.Errorf("guard max-token with an app token: stderr %q, want no warning and why it was not compared", mt.stderr)
	}

	full := as(admin, "status").want(t, exitOK, "fence status with the admin token").stdout
	var keys []string
	for _, l := range strings.Split(strings.TrimSuffix(full, "\n"), "\n") {
		k, _, _ := strings.Cut(l, ":")
		keys = append(keys, k)
	}
	if !slices.Equal(keys, statusTextKeys) {
		t.Errorf("fence status with the admin token: keys %q, want %q", keys, statusTextKeys)
	}
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Sizes in fence status: bytes alone under 1 KiB ("1 B", not "1 B (1
// bytes)"), else one decimal of the binary unit with the exact count; a
// value that rounds up to the next unit is written in it.
func TestStatusBytesText(t *testing.T) {
	for n, want := range map[uint64]string{
		0: "0 B", 1: "1 B", 1023: "1023 B", 1024: "1.0 KiB (1024 bytes)", 1572864: "1.5 MiB (1572864 bytes)",
		1<<20 - 1: "1.0 MiB (1048575 bytes)", 1<<60 + 1<<59: "1.5 EiB (1729382256910270464 bytes)",
	} {
		if got := bytesText(n); got != want {
			t.Errorf("bytesText(%d) = %q, want %q", n, got, want)
		}
	}
}
