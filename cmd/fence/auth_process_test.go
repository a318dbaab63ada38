//go:build e2e

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// secretOf is the "secret" of a --json reply.
func secretOf(t *testing.T, r result) (id, secret string) {
	t.Helper()
	var out struct{ ID, Secret string }
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Secret == "" {
		t.Fatalf("no secret in %q: %v", r.stdout, err)
	}
	return out.ID, out.Secret
}

// fenceRunEnv is fenceRun with more environment.
func fenceRunEnv(t *testing.T, url string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), procLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, fenceBin, args...)
	cmd.Env = append(append(os.Environ(), "FENCE_SERVER="+url), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return result{cmd.ProcessState.ExitCode(), o.String(), e.String()}
}

// The operator's story with the CLI against a real server: bootstrap once,
// a role and two tokens, checking on; no token and a token without the
// permission are refused (exit 4, naming why); principal B cannot renew or
// release A's lease knowing its token; a revoked token is refused; a lost
// admin token is recovered with the reset file in the data dir.
func TestProcessAuthStory(t *testing.T) {
	dir := t.TempDir()
	srv := startServe(t, "--data-dir", dir)
	_, admin := secretOf(t, fenceRun(t, srv.url, "auth", "bootstrap", "--json").want(t, exitOK, "bootstrap"))
	if !strings.HasPrefix(admin, "fence_") {
		t.Fatalf("secret %q", admin)
	}
	r := fenceRun(t, srv.url, "auth", "bootstrap").want(t, exitRefused, "a second bootstrap")
	if !strings.Contains(r.stderr, "PERMISSION_DENIED") {
		t.Fatalf("second bootstrap: %s", r.stderr)
	}
	as := func(secret string, args ...string) result {
		return fenceRun(t, srv.url, append([]string{"--auth-token", secret}, args...)...)
	}
	as(admin, "role", "grant", "app", "lock:jobs/", "read:jobs/").want(t, exitOK, "role grant")
	_, a := secretOf(t, as(admin, "token", "create", "--role", "app", "--description", "A", "--json").want(t, exitOK, "token A"))
	bID, b := secretOf(t, as(admin, "token", "create", "--role", "app", "--description", "B", "--json").want(t, exitOK, "token B"))
	as(admin, "auth", "enable").want(t, exitOK, "enable")

	if r := fenceRun(t, srv.url, "acquire", "jobs/x", "--ttl", "30s").want(t, exitRefused, "no token"); !strings.Contains(r.stderr, "UNAUTHENTICATED") {
		t.Fatalf("no token: %s", r.stderr)
	}
	// FENCE_AUTH_TOKEN as --auth-token.
	tok := tokenOf(t, fenceRunEnv(t, srv.url, []string{"FENCE_AUTH_TOKEN=" + a}, "acquire", "jobs/x", "--ttl", "30s").want(t, exitOK, "A acquires").stdout)
	if r := as(a, "acquire", "other/x", "--ttl", "30s").want(t, exitRefused, "A outside its prefix"); !strings.Contains(r.stderr, "PERMISSION_DENIED") {
		t.Fatalf("outside prefix: %s", r.stderr)
	}
	for _, verb := range []string{"renew", "release"} {
		r := as(b, verb, "jobs/x", "--token", itoa(tok)).want(t, exitRefused, "B "+verb+"s A's lease")
		if !strings.Contains(r.stderr, "PERMISSION_DENIED") || !strings.Contains(r.stderr, "lease") {
			t.Fatalf("B %s: %s", verb, r.stderr)
		}
	}
	as(a, "renew", "jobs/x", "--token", itoa(tok)).want(t, exitOK, "A renews")
	if r := as(a, "token", "list").want(t, exitRefused, "A lists tokens"); !strings.Contains(r.stderr, "admin") {
		t.Fatalf("token list as A: %s", r.stderr)
	}
	as(admin, "token", "revoke", bID).want(t, exitOK, "revoke B")
	if r := as(b, "locks", "jobs/").want(t, exitRefused, "revoked B"); !strings.Contains(r.stderr, "revoked") {
		t.Fatalf("revoked: %s", r.stderr)
	}

	// The admin token is lost: with a shell on the server, the reset file
	// ("N SECRET") permits exactly one more bootstrap naming both. N is
	// no secret: a plain bootstrap's refusal says it.
	if r := fenceRun(t, srv.url, "auth", "bootstrap").want(t, exitRefused, "a plain bootstrap"); !strings.Contains(r.stderr, "already bootstrapped 1 time(s)") {
		t.Fatalf("a plain bootstrap does not say the count: %s", r.stderr)
	}
	resetFile := filepath.Join(dir, "auth-reset")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(resetFile, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const secret = "6b0f3e5a9c1d27f48e0a5b6c7d8e9f10" // 32 hex characters: 128 bits
	refused := func(why string, r result, want ...string) {
		t.Helper()
		r.want(t, exitRefused, why)
		for _, w := range want {
			if !strings.Contains(r.stderr, w) {
				t.Fatalf("%s: %q does not say %q", why, r.stderr, w)
			}
		}
		if strings.Contains(r.stderr, secret) {
			t.Fatalf("%s: the refusal shows the file's secret: %s", why, r.stderr)
		}
	}
	refused("reset without the file", as("fence_nope_x", "auth", "bootstrap", "--reset-index", "1", "--reset-secret", secret), "no reset file")
	if r := fenceRun(t, srv.url, "auth", "bootstrap", "--reset-index", "1").want(t, exitUsage, "a reset without a secret"); !strings.Contains(r.stderr, "FENCE_RESET_SECRET") {
		t.Fatalf("a reset without a secret: %s", r.stderr)
	}
	// The file of old, holding the public index only, permits nothing.
	write("1\n")
	refused("a reset file without a secret", fenceRun(t, srv.url, "auth", "bootstrap", "--reset-index", "1", "--reset-secret", secret), `not \"N SECRET\"`)
	write("1 short-secret\n")
	refused("a weak secret", fenceRun(t, srv.url, "auth", "bootstrap", "--reset-index", "1", "--reset-secret", "short-secret"), "too weak", "at least 32 characters")
	one := strings.Repeat("a", 32)
	write("1 " + one + "\n")
	refused("32 of one letter", fenceRun(t, srv.url, "auth", "bootstrap", "--reset-index", "1", "--reset-secret", one), "too weak", "8 of them different")
	// A file others may read proves no shell on the server.
	write("1 " + secret + "\n")
	if err := os.Chmod(resetFile, 0o644); err != nil {
		t.Fatal(err)
	}
	refused("a reset file others may read", fenceRun(t, srv.url, "auth", "bootstrap", "--reset-index", "1", "--reset-secret", secret), "chmod 600")
	if err := os.Chmod(resetFile, 0o600); err != nil {
		t.Fatal(err)
	}
	refused("a wrong secret", fenceRun(t, srv.url, "auth", "bootstrap", "--reset-index", "1", "--reset-secret", secret[1:]+"0"), "wrong reset secret")
	refused("a wrong index", fenceRun(t, srv.url, "auth", "bootstrap", "--reset-index", "2", "--reset-secret", secret), "wrong reset index")
	// FENCE_RESET_SECRET as --reset-secret.
	_, admin2 := secretOf(t, fenceRunEnv(t, srv.url, []string{"FENCE_RESET_SECRET=" + secret}, "auth", "bootstrap", "--reset-index", "1", "--json").want(t, exitOK, "reset bootstrap"))
	refused("the reset file used twice", fenceRun(t, srv.url, "auth", "bootstrap", "--reset-index", "1", "--reset-secret", secret), "already bootstrapped 2 time(s)")
	as(admin2, "token", "list").want(t, exitOK, "the new admin token")
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
