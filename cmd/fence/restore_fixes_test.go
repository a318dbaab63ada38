package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// F4: a --floor that would put the first token above 2^53 − 2^40 is
// refused (exit 2) naming the bound, before anything is written — the
// attacker's 2^53−3 included; one just below the bound restores.
func TestRestoreFloorHeadroom(t *testing.T) {
	file := backupFile(t, time.Now())
	for _, floor := range []string{"9006099743113216", "9007199254740989", "9007199254740990"} {
		dir := filepath.Join(t.TempDir(), "d")
		code, _, errs := runRestore(file, "--data-dir", dir, "--floor", floor)
		if code != exitUsage || !strings.Contains(errs, "at most 9006099743113216 (2^53 − 2^40") || !strings.Contains(errs, floor+" (--floor)") {
			t.Errorf("--floor %s: exit %d, stderr %q; want exit 2 naming the bound 2^53 − 2^40 and the floor", floor, code, errs)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("--floor %s: %s was created", floor, dir)
		}
	}
	dir := filepath.Join(t.TempDir(), "d")
	code, out, errs := runRestore(file, "--data-dir", dir, "--floor", "9006099743113215")
	if code != exitOK || !strings.Contains(out, "first token:  9006099743113216") {
		t.Errorf("--floor at the bound − 1: exit %d\n%s\n%s", code, out, errs)
	}
}
