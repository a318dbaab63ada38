//go:build e2e

package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence/node"
	"github.com/fenceworks/fence/testkit/testutil"
)

// serveRefused runs `fence serve args...` and expects it to refuse to
// start: it fails the test (and stops the process) if it serves instead.
func serveRefused(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), procLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, fenceBin, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if servingRe.MatchString(sc.Text()) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("fence serve %q started instead of refusing:\n%s", args, strings.Join(lines, "\n"))
		}
	}
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("fence serve %q did not exit within %s", args, procLimit)
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stderr: strings.Join(lines, "\n")}
}

// The same backup restored into two dirs, the second started with --join
// the first (adversarial F11), made two one-node clusters granting the
// same locks: --join asked nobody ("already a member"). A dir fence restore
// made forms its own cluster: until its first start, --join, --peers and
// --bootstrap on it are refused, saying what to do; the marker stays so the
// refusal repeats. Started without them it leads alone; a node with an
// empty dir joins it.
func TestProcessRestoredDirRefusesJoin(t *testing.T) {
	file := backupFile(t, time.Now().Add(-time.Minute))
	base := t.TempDir()
	d1, d2 := filepath.Join(base, "n1"), filepath.Join(base, "n2")
	a1, a2, a3 := testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t)
	fenceRun(t, "", "restore", file, "--data-dir", d1, "--node-id", "n1", "--raft-addr", a1).want(t, 0, "restore into n1")
	fenceRun(t, "", "restore", file, "--data-dir", d2, "--node-id", "n2", "--raft-addr", a2).want(t, 0, "restore into n2")

	n1 := startServe(t, "--data-dir", d1, "--node-id", "n1", "--raft-addr", a1)
	if _, err := os.Stat(filepath.Join(d1, node.RestoredFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("n1's restore marker after its first start: %v", err)
	}

	for _, flags := range [][]string{
		{"--join", n1.url},
		{"--peers", "n1=" + a1 + ",n2=" + a2},
		{"--bootstrap"},
	} {
		r := serveRefused(t, append([]string{"--data-dir", d2, "--node-id", "n2", "--raft-addr", a2}, flags...)...)
		if r.code != exitUsage {
			t.Fatalf("serve %s on a restored dir: exit %d, want %d\n%s", flags[0], r.code, exitUsage, r.stderr)
		}
		for _, want := range []string{flags[0], "made by fence restore", "without --join, --peers or --bootstrap", "EMPTY data dir and --join"} {
			if !strings.Contains(r.stderr, want) {
				t.Fatalf("serve %s on a restored dir: the refusal does not say %q:\n%s", flags[0], want, r.stderr)
			}
		}
		if _, err := os.Stat(filepath.Join(d2, node.RestoredFile)); err != nil {
			t.Fatalf("after the refused start (%s) the marker is gone: %v", flags[0], err)
		}
	}

	// What the refusal says to do: an empty dir joins the restored node.
	startServe(t, "--node-id", "n3", "--raft-addr", a3, "--join", n1.url)
	var m result
	for deadline := time.Now().Add(procLimit); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		m = fenceRun(t, n1.url, "members")
		if m.code == 0 && strings.Contains(m.stdout, "n3 ") && strings.Contains(m.stdout, "leader") {
			return
		}
	}
	t.Fatalf("n3 (empty dir, --join n1) is not a member of the restored n1's cluster:\n%s%s", m.stdout, m.stderr)
}
