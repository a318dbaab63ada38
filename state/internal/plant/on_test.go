//go:build plantbug

package plant

import (
	"maps"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string][]Bug{
		"":                                       nil,
		" , ,":                                   nil,
		"skip-compare":                           {SkipCompare},
		"ids-forgotten, grant-held":              {IDsForgotten, GrantHeld},
		"grant-held,skip-compare,ids-forgotten,": {IDsForgotten, SkipCompare, GrantHeld},
	} {
		got, err := parse(in)
		if err != nil {
			t.Errorf("parse(%q): %v", in, err)
			continue
		}
		wantSet := map[Bug]bool{}
		for _, b := range want {
			wantSet[b] = true
		}
		if !maps.Equal(got, wantSet) {
			t.Errorf("parse(%q) = %v, want %v", in, got, wantSet)
		}
	}
	for _, in := range []string{"skip_compare", "skip-compare,grant", "SKIP-COMPARE"} {
		if _, err := parse(in); err == nil || !strings.Contains(err.Error(), "known: ids-forgotten, skip-compare, grant-held") {
			t.Errorf("parse(%q): err %v, want an unknown-bug error naming the known ones", in, err)
		}
	}
}

func TestMustParsePanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), marker) || !strings.Contains(r.(string), `"nope"`) {
			t.Errorf("recover() = %v, want a panic naming %q and the bad name", r, marker)
		}
	}()
	mustParse("skip-compare,nope")
}

// On answers from what FENCE_PLANTBUG said at start (here the test
// process's own environment).
func TestOnFollowsActive(t *testing.T) {
	saved := active
	defer func() { active = saved }()
	active = map[Bug]bool{GrantHeld: true}
	if !On(GrantHeld) || On(SkipCompare) || On(IDsForgotten) {
		t.Errorf("On with only grant-held active: %v %v %v", On(GrantHeld), On(SkipCompare), On(IDsForgotten))
	}
}
