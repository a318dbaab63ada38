package state

import (
	"math"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// tokens issues n tokens (a lock per token) so writes with them are known.
func tokens(n int) []Command {
	var cs []Command
	for i := range n {
		cs = append(cs, acq(0, string(rune('a'+i)), "w", time.Second))
	}
	return cs
}

func wantResource(value string, last fence.Token, version uint64, replayed bool) func(*testing.T, *Machine, Result) {
	return func(t *testing.T, m *Machine, r Result) {
		t.Helper()
		if r.Err != nil || r.Resource == nil {
			t.Fatalf("want accepted, got %v", r.Err)
		}
		got := *r.Resource
		if string(got.Value) != value || got.LastToken != last || got.Version != version || r.Replayed != replayed || got.Resource != "s" {
			t.Fatalf("result %+v (value %q) replayed %v, want %q last %d version %d replayed %v", got, got.Value, r.Replayed, value, last, version, replayed)
		}
	}
}

func TestFencedResources(t *testing.T) {
	with := func(extra ...Command) []Command { return append(tokens(3), extra...) }
	runScenarios(t, []scenario{
		{name: "first write", setup: tokens(1), cmd: write(0, "s", 1, "v", ""), check: wantResource("v", 1, 1, false)},
		{name: "equal token accepted", setup: with(write(0, "s", 2, "a", "")), cmd: write(0, "s", 2, "b", ""), check: wantResource("b", 2, 2, false)},
		{name: "newer token accepted", setup: with(write(0, "s", 2, "a", "")), cmd: write(0, "s", 3, "b", ""), check: wantResource("b", 3, 2, false)},
		{name: "older token refused with both numbers", setup: with(write(0, "s", 2, "a", "")), cmd: write(0, "s", 1, "b", ""), check: func(t *testing.T, m *Machine, r Result) {
			e := errAs[*fence.StaleTokenError](t, r.Err)
			if e.Resource != "s" || e.Token != 1 || e.LastAccepted != 2 {
				t.Fatalf("%+v", e)
			}
			if st := m.Resource("s"); string(st.Value) != "a" || st.Version != 1 {
				t.Fatalf("refused write changed %+v", st)
			}
		}},
		{name: "never-issued token refused", setup: tokens(1), cmd: write(0, "s", 2, "v", ""), check: func(t *testing.T, m *Machine, r Result) {
			e := errAs[*fence.UnknownTokenError](t, r.Err)
			if e.Token != 2 || e.LastIssued != 1 || m.Resource("s").Version != 0 {
				t.Fatalf("%+v", e)
			}
		}},
		{name: "add to missing is from 0", setup: tokens(1), cmd: add(0, "s", 1, 5, ""), check: func(t *testing.T, m *Machine, r Result) {
			wantResource("5", 1, 1, false)(t, m, r)
			if r.AddValue != 5 {
				t.Fatalf("AddValue %d", r.AddValue)
			}
		}},
		{name: "add to a number", setup: with(write(0, "s", 1, "-7", "")), cmd: add(0, "s", 2, 10, ""), check: wantResource("3", 2, 2, false)},
		{name: "add to text refused", setup: with(write(0, "s", 1, "abc", "")), cmd: add(0, "s", 1, 1, ""), check: func(t *testing.T, m *Machine, r Result) {
			e := errAs[*fence.InvalidError](t, r.Err)
			if e.Field != "value" || e.Bound != "a decimal integer to add to" || m.Resource("s").Version != 1 {
				t.Fatalf("%+v", e)
			}
		}},
		{name: "add overflow refused", setup: with(write(0, "s", 1, "9223372036854775800", "")), cmd: add(0, "s", 1, 8, ""), check: func(t *testing.T, _ *Machine, r Result) {
			if e := errAs[*fence.InvalidError](t, r.Err); e.Field != "delta" {
				t.Fatalf("%+v", e)
			}
		}},
		{name: "add underflow refused", setup: with(write(0, "s", 1, "-9223372036854775800", "")), cmd: add(0, "s", 1, math.MinInt64, ""), check: func(t *testing.T, _ *Machine, r Result) {
			if e := errAs[*fence.InvalidError](t, r.Err); e.Field != "delta" {
				t.Fatalf("%+v", e)
			}
		}},
		{name: "stale add refused", setup: with(write(0, "s", 3, "1", "")), cmd: add(0, "s", 2, 1, ""), check: func(t *testing.T, _ *Machine, r Result) {
			errAs[*fence.StaleTokenError](t, r.Err)
		}},
		{name: "repeated op_id write replays without applying", setup: with(write(0, "s", 2, "a", "op1")), cmd: write(0, "s", 2, "a", "op1"), check: func(t *testing.T, m *Machine, r Result) {
			wantResource("a", 2, 1, true)(t, m, r)
			if m.Resource("s").Version != 1 {
				t.Fatal("applied twice")
			}
		}},
		{name: "repeated op_id add replays without applying", setup: with(add(0, "s", 2, 5, "op1")), cmd: add(0, "s", 2, 5, "op1"), check: func(t *testing.T, m *Machine, r Result) {
			wantResource("5", 2, 1, true)(t, m, r)
			if r.AddValue != 5 || string(m.Resource("s").Value) != "5" {
				t.Fatal("applied twice")
			}
		}},
		{name: "replay comes before the token check", setup: with(write(0, "s", 1, "a", "op1"), write(0, "s", 3, "b", "")), cmd: write(0, "s", 1, "a", "op1"), check: func(t *testing.T, m *Machine, r Result) {
			wantResource("a", 1, 1, true)(t, m, r)
			if st := m.Resource("s"); string(st.Value) != "b" {
				t.Fatalf("replay overwrote: %+v", st)
			}
		}},
		{name: "op_id with another value conflicts", setup: with(write(0, "s", 2, "a", "op1")), cmd: write(0, "s", 2, "b", "op1"), check: wantConflict("op_id", "op1")},
		{name: "op_id with another token conflicts", setup: with(write(0, "s", 2, "a", "op1")), cmd: write(0, "s", 3, "a", "op1"), check: wantConflict("op_id", "op1")},
		{name: "op_id with another delta conflicts", setup: with(add(0, "s", 2, 1, "op1")), cmd: add(0, "s", 2, 2, "op1"), check: wantConflict("op_id", "op1")},
		{name: "op_id of a write reused by an add conflicts", setup: with(write(0, "s", 2, "1", "op1")), cmd: add(0, "s", 2, 1, "op1"), check: wantConflict("op_id", "op1")},
		{name: "op_id is per resource", setup: with(write(0, "s", 2, "a", "op1")), cmd: Command{Op: OpWrite, Name: "t", Token: 2, Value: []byte("z"), OpID: "op1"}, check: func(t *testing.T, _ *Machine, r Result) {
			if r.Err != nil || r.Replayed {
				t.Fatalf("%+v", r)
			}
		}},
		{name: "a refused op is not remembered", setup: with(write(0, "s", 3, "a", "")), cmd: write(0, "s", 2, "b", "op1"), check: func(t *testing.T, m *Machine, r Result) {
			errAs[*fence.StaleTokenError](t, r.Err)
			if r := m.Apply(write(0, "s", 3, "c", "op1")); r.Err != nil || r.Replayed {
				t.Fatalf("op_id of a refused op was remembered: %+v", r)
			}
		}},
	})
}
