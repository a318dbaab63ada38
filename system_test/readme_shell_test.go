//go:build e2e

package system_test

// TestReadmeShellTour runs the README's "From the shell" tour as written.
//
// What it expects of README.md: the first ```console block after the line
// "### From the shell". Each line starting with "$ " is a command; the lines
// after it, up to the next "$ " line, are what it prints (stdout and stderr
// together). Commands run in order with sh -c, in a directory where
// bin/fence is the binary under test, with FENCE_SERVER set to a fresh
// server. Durations in the output ("4.989s left") match any duration.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

type shellStep struct {
	line    int
	command string
	want    []string
}

func TestReadmeShellTour(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(moduleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	steps := parseShellTour(t, string(doc))
	if len(steps) < 3 {
		t.Fatalf("found %d commands in the README's shell tour; want the tour", len(steps))
	}

	srv := startServer(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fenceBinary(t), filepath.Join(dir, "bin", "fence")); err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		cmd := exec.CommandContext(ctx, "sh", "-c", st.command)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "FENCE_SERVER="+srv.URL())
		out, _ := cmd.CombinedOutput() // exit codes are part of the output ("echo exit $?")
		cancel()
		got := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		if len(st.want) == 0 && strings.TrimSpace(string(out)) == "" {
			continue
		}
		if len(got) != len(st.want) {
			t.Errorf("README line %d: %s\nprinted:\n%s\nREADME shows:\n%s", st.line, st.command, out, strings.Join(st.want, "\n"))
			continue
		}
		for i := range got {
			if normalizeDurations(got[i]) != normalizeDurations(st.want[i]) {
				t.Errorf("README line %d: %s\nprinted  %q\nREADME shows %q", st.line, st.command, got[i], st.want[i])
			}
		}
	}
}

// parseShellTour returns the commands of the first console block after the
// "### From the shell" heading, with what each prints.
func parseShellTour(t *testing.T, doc string) []shellStep {
	t.Helper()
	lines := strings.Split(doc, "\n")
	i := 0
	for i < len(lines) && strings.TrimSpace(lines[i]) != "### From the shell" {
		i++
	}
	for i < len(lines) && strings.TrimSpace(lines[i]) != "```console" {
		i++
	}
	if i == len(lines) {
		t.Fatal(`README.md has no "### From the shell" heading followed by a console block`)
	}
	var steps []shellStep
	for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
		if cmd, ok := strings.CutPrefix(lines[i], "$ "); ok {
			steps = append(steps, shellStep{line: i + 1, command: stripComment(cmd)})
			continue
		}
		if len(steps) > 0 {
			steps[len(steps)-1].want = append(steps[len(steps)-1].want, lines[i])
		}
	}
	return steps
}

// stripComment drops a trailing "   # remark" the README adds for the reader.
func stripComment(cmd string) string {
	if i := strings.Index(cmd, "  #"); i >= 0 {
		return strings.TrimSpace(cmd[:i])
	}
	return cmd
}

var remainingRE = regexp.MustCompile(`\d+(\.\d+)?(ns|µs|us|ms|s|m|h)+ left`)

// normalizeDurations replaces remaining times ("4.989s left"), which differ
// run to run, but keeps TTLs the README chose (ttl=5s), which must not.
func normalizeDurations(s string) string {
	return remainingRE.ReplaceAllString(s, "<d> left")
}

func TestNormalizeDurations(t *testing.T) {
	a := normalizeDurations(`BUSY: lock "sku-42" is held by "worker-a" (token 1, 4.989s left)`)
	b := normalizeDurations(`BUSY: lock "sku-42" is held by "worker-a" (token 1, 4.991s left)`)
	if a != b {
		t.Fatalf("%q != %q", a, b)
	}
	if normalizeDurations("token=1 ttl=5s") == normalizeDurations("token=2 ttl=5s") ||
		normalizeDurations("token=1 ttl=5s") == normalizeDurations("token=1 ttl=6s") {
		t.Fatal("tokens and TTLs must not be normalised away")
	}
}
