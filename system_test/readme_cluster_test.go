//go:build e2e

package system_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fenceworks/fence/testkit/harness"
)

// TestReadmeCluster runs the README's "## A cluster" block as written: the
// first ```sh block after that heading. Its addresses 127.0.0.1:75xx (raft)
// and :76xx (clients) are replaced by free loopback ports, and it runs in a
// fresh directory where bin/fence is the binary under test (so its data-a…
// dirs are temporary). The lines up to the last one ending in "&" start the
// servers; once each answers /readyz, the rest (export FENCE_SERVER, fence
// members) runs in one shell. `fence members` must list three voters with
// one leader, and an acquire through the FENCE_SERVER list must be granted.
// A wrong flag in the README (a server that does not start, a cluster that
// does not form, an endpoint list the CLI refuses) fails the test.
func TestReadmeCluster(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(moduleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	block := readmeClusterBlock(t, string(doc))

	// Free ports for the README's fixed ones.
	ports := map[string]string{}
	for _, old := range regexp.MustCompile(`127\.0\.0\.1:7[56]\d\d`).FindAllString(block, -1) {
		if _, ok := ports[old]; !ok {
			addr, err := harness.FreeAddr()
			if err != nil {
				t.Fatal(err)
			}
			ports[old] = addr
		}
	}
	if len(ports) != 6 {
		t.Fatalf("the README's cluster block names %d addresses (%v), want 3 raft and 3 client addresses", len(ports), ports)
	}
	for old, addr := range ports {
		block = strings.ReplaceAll(block, old, addr)
	}
	lines := strings.Split(strings.TrimSpace(block), "\n")
	lastBg := -1
	for i, l := range lines {
		if strings.HasSuffix(strings.TrimSpace(l), "&") {
			lastBg = i
		}
	}
	if lastBg < 2 {
		t.Fatalf("the README's cluster block starts %d servers in the background, want 3:\n%s", lastBg+1, block)
	}
	start, rest := strings.Join(lines[:lastBg+1], "\n"), strings.Join(lines[lastBg+1:], "\n")

	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fenceBinary(t), filepath.Join(dir, "bin", "fence")); err != nil {
		t.Fatal(err)
	}

	// The servers: sh starts them in the background and exits; they stay
	// in its process group, which the cleanup stops (SIGTERM, then
	// SIGKILL). Their output goes to a file so that nothing waits on it.
	logPath := filepath.Join(dir, "servers.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	sh := exec.Command("sh", "-c", start+"\njobs -p > server-pids")
	sh.Dir = dir
	sh.Stdout, sh.Stderr = logf, logf
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := sh.Process.Pid
	t.Cleanup(func() {
		syscall.Kill(-pgid, syscall.SIGTERM)
		deadline := time.Now().Add(hangGuard)
		for syscall.Kill(-pgid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		syscall.Kill(-pgid, syscall.SIGKILL)
		out, _ := os.ReadFile(logPath)
		checkRaces(t, "the README's servers", string(out))
		if t.Failed() {
			t.Logf("the README's servers:\n%s", out)
		}
	})
	if err := sh.Wait(); err != nil {
		t.Fatalf("sh -c %q: %v", start, err)
	}
	pidText, err := os.ReadFile(filepath.Join(dir, "server-pids"))
	if err != nil {
		t.Fatal(err)
	}
	pids := strings.Fields(string(pidText))
	if len(pids) != 3 {
		t.Fatalf("the README's block left %d background jobs (%q), want 3 servers", len(pids), pids)
	}
	hc := &http.Client{Timeout: time.Second}
	for old, addr := range ports {
		if !strings.Contains(old, ":76") {
			continue
		}
		deadline := time.Now().Add(hangGuard)
		for {
			resp, err := hc.Get("http://" + addr + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			for _, p := range pids {
				if pid, _ := strconv.Atoi(p); syscall.Kill(pid, 0) != nil {
					t.Fatalf("a server of the README's block (pid %s) exited", p)
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("the README's server on %s (%s) is not ready after %v", addr, old, hangGuard)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// The rest of the block, as written, then an acquire through the list.
	out := readmeShell(t, dir, rest)
	var voters, leaders int
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 4 && f[2] == "voter" {
			voters++
			if f[3] == "leader" && len(f) >= 5 && f[4] == "*" {
				leaders++
			}
		}
	}
	if voters != 3 || leaders != 1 {
		t.Fatalf("fence members listed %d voters and %d leaders, want 3 and 1:\n%s", voters, leaders, out)
	}
	got := readmeShell(t, dir, rest[:strings.LastIndex(rest, "\n")+1]+"bin/fence acquire readme-cluster --ttl 10s --owner readme")
	if !regexp.MustCompile(`acquired readme-cluster token=\d+`).MatchString(got) {
		t.Fatalf("an acquire through the README's FENCE_SERVER printed:\n%s", got)
	}
	t.Logf("fence members:\n%s\n%s", out, got)
}

// readmeShell runs script with sh in dir and returns its output; a non-zero
// exit fails t.
func readmeShell(t *testing.T, dir, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "FENCE_SERVER=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sh -c %q: %v\n%s", script, err, out)
	}
	return string(out)
}

// readmeClusterBlock is the first ```sh block after the "## A cluster"
// heading.
func readmeClusterBlock(t *testing.T, doc string) string {
	t.Helper()
	_, after, ok := strings.Cut(doc, "\n## A cluster\n")
	if !ok {
		t.Fatal(`README.md has no "## A cluster" heading`)
	}
	_, after, ok = strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatal(`README.md has no ` + "```sh" + ` block after "## A cluster"`)
	}
	block, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatal("the README's cluster block does not end")
	}
	return block
}
