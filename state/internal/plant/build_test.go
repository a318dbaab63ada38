//go:build e2e

package plant_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// marker is the string on.go puts in every plantbug binary (repeated here:
// a build without the tag does not define it).
const marker = "fence-plantbug-active"

// plantedSymbols are functions only planted code has: the helpers the
// state hooks call, and the parsing of FENCE_PLANTBUG.
var plantedSymbols = []string{
	"github.com/fenceworks/fence/state.(*impl).plantForgetOps",
	"github.com/fenceworks/fence/state.(*impl).plantForgetSaved",
	"github.com/fenceworks/fence/state.(*impl).plantGrantHeld",
	"github.com/fenceworks/fence/state.(*impl).plantSharedBeside",
	"github.com/fenceworks/fence/state.(*impl).plantSetSplit",
	"github.com/fenceworks/fence/state/internal/plant.parse",
}

// TestReleaseHasNoPlantedCode builds cmd/fence without and with the
// plantbug tag: the release binary has neither the marker string nor any
// planted symbol and ignores FENCE_PLANTBUG; the plantbug binary has them
// all (so this test can fail), says so at start, and refuses an unknown
// fault name.
func TestReleaseHasNoPlantedCode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/fence twice")
	}
	dir := t.TempDir()
	release := buildFence(t, filepath.Join(dir, "fence"), "")
	planted := buildFence(t, filepath.Join(dir, "fence-plantbug"), "plantbug")

	if bin := readFile(t, release); bytes.Contains(bin, []byte(marker)) {
		t.Errorf("release binary contains %q", marker)
	}
	if syms := plantSymbols(t, release); len(syms) > 0 {
		t.Errorf("release binary has planted symbols:\n%s", strings.Join(syms, "\n"))
	}
	if bin := readFile(t, planted); !bytes.Contains(bin, []byte(marker)) {
		t.Errorf("plantbug binary lacks %q", marker)
	}
	syms := strings.Join(plantSymbols(t, planted), "\n")
	for _, s := range plantedSymbols {
		if !strings.Contains(syms, " "+s+"\n") && !strings.HasSuffix(syms, " "+s) {
			t.Errorf("plantbug binary lacks symbol %s; its planted symbols:\n%s", s, syms)
		}
	}

	// At start: the plantbug binary names the faults on, the release one
	// says nothing; an unknown name stops the plantbug binary.
	if out, err := runFence(planted, "FENCE_PLANTBUG=skip-compare"); err != nil || !strings.Contains(out, marker+": planted bugs FENCE_PLANTBUG=skip-compare") {
		t.Errorf("plantbug binary with skip-compare: err=%v, output:\n%s", err, out)
	}
	if out, err := runFence(planted, "FENCE_PLANTBUG="); err != nil || strings.Contains(out, marker) {
		t.Errorf("plantbug binary with no fault on: err=%v, output:\n%s", err, out)
	}
	if out, err := runFence(release, "FENCE_PLANTBUG=skip-compare,bogus"); err != nil || strings.Contains(out, marker) {
		t.Errorf("release binary with FENCE_PLANTBUG set: err=%v, output:\n%s", err, out)
	}
	if out, err := runFence(planted, "FENCE_PLANTBUG=skip-compare,bogus"); err == nil || !strings.Contains(out, `unknown planted bug "bogus"`) {
		t.Errorf("plantbug binary with an unknown fault: err=%v, output:\n%s", err, out)
	}
}

// buildFence builds cmd/fence into out with tags (none when empty), with
// GOFLAGS cleared so that the caller's flags cannot add a tag.
func buildFence(t *testing.T, out, tags string) string {
	t.Helper()
	args := []string{"build", "-o", out}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command("go", append(args, "github.com/fenceworks/fence/cmd/fence")...)
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, b)
	}
	return out
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// plantSymbols lists bin's symbols (go tool nm) of package state/internal/plant
// and of state's planted helpers.
func plantSymbols(t *testing.T, bin string) []string {
	t.Helper()
	b, err := exec.Command("go", "tool", "nm", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool nm %s: %v\n%s", bin, err, b)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "fence/state/internal/plant.") || strings.Contains(line, "fence/state.(*impl).plant") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// runFence runs `fence version` with env added and returns its combined
// output.
func runFence(bin string, env ...string) (string, error) {
	cmd := exec.Command(bin, "version")
	cmd.Env = append(os.Environ(), env...)
	b, err := cmd.CombinedOutput()
	return string(b), err
}
