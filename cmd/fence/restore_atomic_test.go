//go:build e2e

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// F11: fence restore reads FENCE_TEST_CLOCK_OFFSET (and
// FENCE_TEST_RESTORE_HALT), test-only hooks; set, each is named in one
// warning line on stderr, as fence serve warns (with --json too: stdout
// stays the report). Unset, no warning. Planted: the warning loop removed
// from restoreCmd — red.
func TestRestoreWarnsOfTestHooks(t *testing.T) {
	file := backupFile(t, time.Now())
	t.Setenv(envClockOffset, "+1h")
	code, out, errs := runRestore(file, "--data-dir", filepath.Join(t.TempDir(), "d"), "--json")
	want := "fence restore: warning: test-only hook set in the environment (never in production): FENCE_TEST_CLOCK_OFFSET=+1h\n"
	if code != exitOK || strings.Count(errs, want) != 1 || strings.Count(errs, "test-only hook") != 1 || strings.Contains(out, "test-only") {
		t.Errorf("restore with %s=+1h: exit %d, stderr %q, stdout %q; want exit 0 and one line %q on stderr", envClockOffset, code, errs, out, want)
	}
	t.Setenv(envClockOffset, "")
	code, _, errs = runRestore(file, "--data-dir", filepath.Join(t.TempDir(), "d"))
	if code != exitOK || strings.Contains(errs, "test-only") {
		t.Errorf("restore without test hooks: exit %d, stderr %q; want no warning", code, errs)
	}
}

// A staging directory an unfinished restore left beside (DIR.restoring) or
// in (DIR/.restoring) the data dir is refused by the next restore (exit 4,
// --json kind restore_incomplete, naming it), which writes nothing: it
// cannot tell a killed restore from one running now, and the operator
// removes it. Planted: restoreCmd and backup.Restore without
// CheckRestoreLeftover — the inside case said only dir_not_empty: red (the
// sibling case is still refused, by the staging directory's exclusive
// Mkdir in backup.Restore's build).
func TestRestoreRefusesAnUnfinishedOne(t *testing.T) {
	file := backupFile(t, time.Now())
	for _, inside := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "d")
		staging := dir + ".restoring"
		if inside {
			staging = filepath.Join(dir, ".restoring")
		}
		if err := os.MkdirAll(filepath.Join(staging, "wal"), 0o755); err != nil {
			t.Fatal(err)
		}
		code, out, errs := runRestore(file, "--data-dir", dir, "--json")
		if code != exitRefused || !strings.Contains(out, `"kind":"restore_incomplete"`) || !strings.Contains(errs, staging+" is there") {
			t.Errorf("restore beside %s: exit %d, stdout %q, stderr %q; want exit 4, kind restore_incomplete, naming it", staging, code, out, errs)
		}
		if names := dirNames(t, filepath.Dir(dir)); inside && strings.Join(names, ",") != "d" || !inside && strings.Join(names, ",") != "d.restoring" {
			t.Errorf("after the refusal the parent holds %q", names)
		}
	}
}
