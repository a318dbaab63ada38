//go:build e2e

package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence/backup"
)

// fence restore prints Plan's warning when a --floor above the wall floor
// chooses the first token (adversarial F2): tokens run ahead of the wall
// clock, and a later restore of an older backup needs a --floor.
func TestRestoreWarnsFloorAheadOfTheWallClock(t *testing.T) {
	file := backupFile(t, time.Now().Add(-time.Minute))
	floor := backup.WallFloor(time.Now().Add(time.Hour)) // an hour of wall floor ahead
	code, stdout, stderr := runRestore(file, "--data-dir", filepath.Join(t.TempDir(), "r"), "--floor", strconv.FormatUint(uint64(floor), 10))
	out := stdout + stderr
	if code != exitOK || !strings.Contains(out, "tokens now run ahead of the wall clock by ") || !strings.Contains(out, "--floor "+strconv.FormatUint(uint64(floor), 10)) ||
		!strings.Contains(out, "a later restore of an older backup must be given a --floor at least the largest token this cluster issues (fence status lastToken)") {
		t.Fatalf("restore with a --floor an hour ahead: exit %d\n%s", code, out)
	}
}
