package harness

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// processStart matches what only an end-to-end test does: build or start a
// program (a fence server, a tool, a doc client) as a separate process.
var processStart = regexp.MustCompile(`harness\.Start|harness\.FenceBinary|harness\.Build\(|"go", "build"|"go", "install"|exec\.Command`)

// The unit tier (go test ./... without tags) starts no process: every test
// file that builds or starts one carries //go:build e2e, so the quick loop
// stays quick and `make test-e2e` holds every process test.
func TestUnitTierStartsNoProcess(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// bench/ is its own module, run by make test separately.
			if name := d.Name(); path != root && (name == "bench" || name == "node_modules" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		// This file names the patterns it looks for.
		if !strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, "testkit/harness/tiers_test.go") {
			return nil
		}
		constraint, body := buildLine(t, path)
		if strings.Contains(constraint, "e2e") || strings.Contains(constraint, "plantbug") {
			return nil
		}
		checked++
		if m := processStart.FindString(body); m != "" {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s is in the unit tier but starts a process (%s): give it //go:build e2e", rel, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d unit-tier test files, want the whole module's (>= 100)", checked)
	}
}

// buildLine returns the file's //go:build expression ("" without one) and
// its whole text.
func buildLine(t *testing.T, path string) (string, string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "//go:build ") {
			return strings.TrimPrefix(line, "//go:build "), string(b)
		}
		if strings.HasPrefix(line, "package ") {
			break
		}
	}
	return "", string(b)
}
