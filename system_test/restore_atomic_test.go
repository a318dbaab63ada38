//go:build e2e

package system_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fenceworks/fence/testkit/harness"
)

// A restore is all-or-nothing (docs/operations.md "Backup and restore",
// node/restoring.go): the real `fence restore` is killed with SIGKILL at
// each step of building the data dir (FENCE_TEST_RESTORE_HALT: the process
// says it halted there; the test waits for that line, not for time), into
// an absent DIR (a staging sibling DIR.restoring, renamed) and into an
// existing empty DIR (staging inside it, entries moved). Then:
//
//   - before the commit step DIR is as it was (absent, or empty);
//   - `fence serve --data-dir DIR` never grants a token at or below the
//     last one the backed-up server issued: it refuses, naming the staging
//     directory, or (killed after the commit) it starts from the restored
//     state with the raised counter;
//   - the next `fence restore` into DIR refuses (exit 4) while the staging
//     directory is there, and succeeds once it is removed.
//
// Planted: Restore building straight into DIR (no staging directory, as
// before): killed at "staged", DIR was an empty dir and serve started a fresh
// store granting token 1 — red.
func TestRestoreKilledPartWay(t *testing.T) {
	t.Parallel() // own processes, ports and dirs: safe beside the other parallel tests (docs/testing.md)
	dir := t.TempDir()
	srv := startServerIn(t, filepath.Join(dir, "orig"))
	a := restoreAPI(srv.URL())
	grantMore(t, a, "before", 3)
	file := filepath.Join(dir, "b.fence")
	backupTo(t, srv.URL(), file)
	last := grantMore(t, a, "after", 3)
	srv.Stop()

	for _, c := range []struct {
		name     string
		existing bool   // DIR an existing empty directory
		step     string // where the restore is killed
		done     bool   // the step is after the commit: DIR holds the whole store
	}{
		{"absent/staged", false, "staged", false},
		{"absent/built", false, "built", false},
		{"absent/synced", false, "synced", false},
		{"absent/renamed", false, "renamed", true},
		{"existing/staged", true, "staged", false},
		{"existing/built", true, "built", false},
		{"existing/synced", true, "synced", false},
		{"existing/moved", true, "moved", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "restored")
			if c.existing {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			before := outsideStaging(dirState(t, d), d)
			killRestoreAt(t, file, d, c.step)
			if !c.done && c.step != "moved" {
				if got := outsideStaging(dirState(t, d), d); got != before {
					t.Fatalf("killed at %s: the data dir changed:\nbefore:\n%s\nafter:\n%s", c.step, before, got)
				}
			}
			if c.done {
				s := startServerIn(t, d)
				if tok := grantLock(t, restoreAPI(s.URL()), "first"); tok <= last {
					t.Fatalf("killed at %s: serve granted token %d, at or below the backed-up cluster's %d", c.step, tok, last)
				}
				s.Stop()
				return
			}
			serveRefusesUnfinished(t, d, last)
			restoreRefused(t, nil, "did not finish", file, "--data-dir", d)
			os.RemoveAll(d + ".restoring")
			if c.existing { // the operator empties DIR again
				ents, _ := os.ReadDir(d)
				for _, e := range ents {
					os.RemoveAll(filepath.Join(d, e.Name()))
				}
			} else {
				os.RemoveAll(d) // the harness made it for the refused serve
			}
			r := restoreOK(t, nil, file, d)
			s := startServerIn(t, d)
			if tok := grantLock(t, restoreAPI(s.URL()), "first"); tok <= last || tok != r.FirstToken {
				t.Fatalf("after a clean restore: first token %d (report %d), the backed-up cluster's last %d", tok, r.FirstToken, last)
			}
			s.Stop()
		})
	}
}

// outsideStaging drops from a dirState the lines of d's staging
// subdirectory (a restore into an existing d builds there).
func outsideStaging(state, d string) string {
	var keep []string
	for _, l := range strings.SplitAfter(state, "\n") {
		if !strings.HasPrefix(l, filepath.Join(d, ".restoring")) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "")
}

// killRestoreAt runs fence restore FILE --data-dir d halting at step, waits
// for its "halted at" line and kills it with SIGKILL.
func killRestoreAt(t *testing.T, file, d, step string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, fenceBinary(t), "restore", file, "--data-dir", d)
	cmd.Env = append(os.Environ(), "FENCE_TEST_RESTORE_HALT="+step)
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(errPipe)
	var seen []string
	halted := false
	for sc.Scan() {
		seen = append(seen, sc.Text())
		if strings.Contains(sc.Text(), "halted at "+step+" ") {
			halted = true
			break
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	if !halted {
		t.Fatalf("fence restore did not halt at %s; stderr:\n%s", step, strings.Join(seen, "\n"))
	}
	if !strings.Contains(strings.Join(seen, "\n"), "warning: test-only hook set in the environment (never in production): FENCE_TEST_RESTORE_HALT="+step) {
		t.Errorf("fence restore did not warn of FENCE_TEST_RESTORE_HALT; stderr:\n%s", strings.Join(seen, "\n"))
	}
}

// serveRefusesUnfinished starts fence serve on d: it must exit refusing
// (naming the unfinished restore); if it serves, a grant must be above last
// (it is not: the test fails, saying which token it granted).
func serveRefusesUnfinished(t *testing.T, d string, last uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	s, err := harness.Start(ctx, harness.Config{Bin: fenceBinary(t), DataDir: d, ReadyTimeout: hangGuard, StopTimeout: hangGuard})
	if err == nil {
		tok := grantLock(t, restoreAPI(s.URL()), "first")
		s.Kill()
		t.Fatalf("fence serve started on a half-made restore and granted token %d (the backed-up cluster's last %d)", tok, last)
	}
	if !strings.Contains(err.Error(), "did not finish") || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("fence serve on a half-made restore: %v; want a refusal naming the unfinished restore", err)
	}
}
