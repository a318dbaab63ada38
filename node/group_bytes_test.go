package node

import (
	"testing"
)

// A group takes queued proposals of one clock until the next would push
// its encoded commands past maxGroupBytes: a group of exactly the bound is
// one group, one byte more starts the next.
func TestGroupByteBound(t *testing.T) {
	c := &leaderClock{}
	prop := func(n int) *proposal { return &proposal{c: c, data: make([]byte, n)} }
	sizes := func(g *group) (out []int) {
		for _, m := range g.m {
			out = append(out, len(m.p.data))
		}
		return out
	}
	half := maxGroupBytes / 2
	pr := &proposer{leaders: 1}
	pr.queue = []*proposal{prop(half), prop(half), prop(1)}
	if g := sizes(pr.take()); len(g) != 2 || g[0]+g[1] != maxGroupBytes {
		t.Fatalf("first group %v, want the two halves (exactly %d bytes)", g, maxGroupBytes)
	}
	if g := sizes(pr.take()); len(g) != 1 || g[0] != 1 {
		t.Fatalf("second group %v, want the 1-byte command", g)
	}
	pr = &proposer{leaders: 1}
	pr.queue = []*proposal{prop(half), prop(half + 1)}
	if g := sizes(pr.take()); len(g) != 1 {
		t.Fatalf("group %v: %d + %d bytes is past the bound, want them apart", g, half, half+1)
	}
}
