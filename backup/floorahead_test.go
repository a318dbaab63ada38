package backup

import (
	"strings"
	"testing"
	"time"
)

// A first token taken from a --floor or a --floor-from above the wall
// floor is warned about (adversarial F2): the counter now runs ahead of the
// wall clock, so a later restore of an older backup with the wall floor
// alone would issue tokens below ones issued. The warning says by how much
// and what a later restore needs. A floor at or below the wall floor, or
// one below the backup's counter, is not warned about this way.
func TestPlanWarnsWhenAFloorRunsAheadOfTheWallClock(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	w := WallFloor(now)
	h := Header{LastToken: 500, WallUnixMS: now.UnixMilli() - 1000}
	ahead := func(rep Report) string {
		for _, s := range rep.Warnings {
			if strings.Contains(s, "run ahead of the wall clock") {
				return s
			}
		}
		return ""
	}
	for name, c := range map[string]struct {
		floors []Floor
		by     string // "": no warning
	}{
		"--floor 200 s of wall floor ahead": {[]Floor{{SourceFlag, w + 200*1000*WallFloorPerMS}}, "3m20s"},
		"guard store 3 days ahead":          {[]Floor{{"postgres://db?table=g", w + 3*24*3600*1000*WallFloorPerMS}}, "72h0m0s (3.0 days)"},
		"--floor 1 token ahead":             {[]Floor{{SourceFlag, w + 1}}, "1µs"},
		"--floor below the wall floor":      {[]Floor{{SourceFlag, w - 1}}, ""},
		"--floor at the wall floor":         {[]Floor{{SourceFlag, w}}, ""},
		"no floor":                          {nil, ""},
	} {
		rep, err := Plan(h, RestoreOptions{Floors: c.floors, Now: now})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := ahead(rep)
		if c.by == "" {
			if got != "" {
				t.Errorf("%s: warned %q", name, got)
			}
			continue
		}
		for _, want := range []string{"by " + c.by + ";", c.floors[0].Source, "a later restore of an older backup must be given a --floor at least the largest token this cluster issues (fence status lastToken)"} {
			if !strings.Contains(got, want) {
				t.Errorf("%s: warning %q does not say %q (warnings %q)", name, got, want, rep.Warnings)
			}
		}
	}
	// The backup's counter is the largest (an earlier floor restore): the
	// floor given does not choose the first token; the wall-clock warning
	// names that case and gives the same advice.
	h.LastToken = w + 5*WallFloorPerMS
	rep, err := Plan(h, RestoreOptions{Floors: []Floor{{SourceFlag, w + 10}}, Now: now})
	if err != nil || rep.First != h.LastToken+1 || len(rep.Warnings) != 1 || strings.Contains(rep.Warnings[0], "the first token comes from") ||
		!strings.Contains(rep.Warnings[0], "an earlier restore was given a --floor") ||
		!strings.Contains(rep.Warnings[0], "run ahead of the wall clock by 5ms: a later restore of an older backup must be given a --floor at least the largest token this cluster issues (fence status lastToken)") {
		t.Fatalf("counter above the floor given: %+v, %v", rep, err)
	}
}
