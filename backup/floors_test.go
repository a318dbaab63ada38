package backup

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// The first token is 1 + the largest of the backup's counter, every floor
// given and the wall floor unix_ms(now) × 1024, whichever is largest.
func TestPlanFirstTokenAboveEveryFloor(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	w := fence.Token(1_700_000_000_000 * 1024)
	h := Header{LastToken: 500, WallUnixMS: now.UnixMilli() - 1000}
	cases := map[string]struct {
		last   fence.Token
		floors []Floor
		now    time.Time
		want   fence.Token
	}{
		"wall clock":       {500, nil, now, w + 1},
		"backup's counter": {w + 10, nil, now, w + 11},
		"--floor":          {500, []Floor{{SourceFlag, w + 99}}, now, w + 100},
		"guard store":      {500, []Floor{{SourceFlag, 7}, {"postgres://db?table=g", w + 5}}, now, w + 6},
	}
	for name, c := range cases {
		h := h
		h.LastToken = c.last
		rep, err := Plan(h, RestoreOptions{Floors: c.floors, Now: c.now})
		if err != nil || rep.First != c.want {
			t.Errorf("%s: first %d, %v; want %d", name, rep.First, err, c.want)
		}
		if rep.Old != c.last || len(rep.Floors) != len(c.floors)+2 || rep.Floors[0].Source != SourceBackup || rep.Floors[len(rep.Floors)-1] != (Floor{SourceWall, w}) {
			t.Errorf("%s: report %+v", name, rep)
		}
		for _, f := range rep.Floors {
			if rep.First <= f.Token {
				t.Errorf("%s: first %d not above floor %+v", name, rep.First, f)
			}
		}
	}
}

// Without --floor, a clock behind the backup's recorded time is refused
// (naming both times); with --floor it goes on, warning. A wall floor not
// above the backup's counter is warned about.
func TestPlanClockBehind(t *testing.T) {
	h := Header{LastToken: 10, WallUnixMS: 1_700_000_000_000}
	behind := time.UnixMilli(h.WallUnixMS - 5000)
	_, err := Plan(h, RestoreOptions{Now: behind, Floors: []Floor{{"postgres://db", 100}}})
	if !errors.Is(err, ErrClockBehind) || !strings.Contains(err.Error(), "1700000000000") || !strings.Contains(err.Error(), "--floor") {
		t.Fatalf("clock 5s behind the backup: %v, want ErrClockBehind naming the times and --floor", err)
	}
	rep, err := Plan(h, RestoreOptions{Now: behind, Floors: []Floor{{SourceFlag, 100}}})
	if err != nil || len(rep.Warnings) == 0 || !strings.Contains(strings.Join(rep.Warnings, ";"), "behind") || !strings.Contains(strings.Join(rep.Warnings, ";"), "session ids") {
		t.Fatalf("with --floor: %+v, %v; want a warning that the clock is behind", rep, err)
	}
	if rep.First != WallFloor(behind)+1 {
		t.Fatalf("first %d, want the wall floor + 1", rep.First)
	}
	// The same instant as the backup is not behind.
	if _, err := Plan(h, RestoreOptions{Now: time.UnixMilli(h.WallUnixMS)}); err != nil {
		t.Fatal(err)
	}
	// A counter at or above the wall floor: warned.
	h.LastToken = WallFloor(time.UnixMilli(h.WallUnixMS + 1))
	rep, err = Plan(h, RestoreOptions{Now: time.UnixMilli(h.WallUnixMS + 1)})
	if err != nil || rep.First != h.LastToken+1 || !strings.Contains(strings.Join(rep.Warnings, ";"), "wall-clock floor") {
		t.Fatalf("counter at the wall floor: %+v, %v", rep, err)
	}
}

// Floors and a first token beyond the largest token are refused, naming
// the field.
func TestPlanRefusesTokensOutOfRange(t *testing.T) {
	h := Header{LastToken: 1, WallUnixMS: 1}
	_, err := Plan(h, RestoreOptions{Now: time.UnixMilli(2), Floors: []Floor{{SourceFlag, fence.MaxTokenJSONInt + 1}}})
	var inv *fence.InvalidError
	if !errors.As(err, &inv) || !strings.Contains(err.Error(), "floor --floor") {
		t.Fatalf("floor above the largest token: %v", err)
	}
	_, err = Plan(h, RestoreOptions{Now: time.UnixMilli(2), Floors: []Floor{{SourceFlag, fence.MaxTokenJSONInt}}})
	if !errors.As(err, &inv) || !strings.Contains(err.Error(), "first token") {
		t.Fatalf("first token above the largest: %v", err)
	}
	if _, err := Plan(h, RestoreOptions{}); !errors.As(err, &inv) {
		t.Fatalf("no time: %v", err)
	}
}

// F4: a first token above MaxFirstToken (2^53 − 2^40) is refused, naming
// the bound and the floor that would give it; one at the bound is
// accepted. The attacker's --floor 2^53−3 (accepted before: the node then
// granted past 2^53−1) is refused.
func TestPlanLeavesHeadroom(t *testing.T) {
	if MaxFirstToken != 9006099743113216 {
		t.Fatalf("MaxFirstToken %d, want 2^53 − 2^40", MaxFirstToken)
	}
	h := Header{LastToken: 1, WallUnixMS: 1}
	now := time.UnixMilli(2)
	rep, err := Plan(h, RestoreOptions{Now: now, Floors: []Floor{{SourceFlag, MaxFirstToken - 1}}})
	if err != nil || rep.First != MaxFirstToken {
		t.Fatalf("floor MaxFirstToken−1: %+v, %v; want first token %d", rep, err, MaxFirstToken)
	}
	for _, f := range []fence.Token{MaxFirstToken, 1<<53 - 3, fence.MaxTokenJSONInt - 1} {
		_, err := Plan(h, RestoreOptions{Now: now, Floors: []Floor{{"postgres://db/x?table=guards", f}}})
		var inv *fence.InvalidError
		if !errors.As(err, &inv) || inv.Field != "first token" || !strings.Contains(err.Error(), "at most 9006099743113216") ||
			!strings.Contains(err.Error(), "2^53 − 2^40") || !strings.Contains(err.Error(), fmt.Sprintf("%d (postgres://db/x?table=guards)", uint64(f))) {
			t.Errorf("floor %d: %v; want the first token refused naming the bound 9006099743113216 and the floor", f, err)
		}
	}
}
