package chaos

import (
	"errors"
	"fmt"
	"slices"
)

// Faults between the nodes of a raft cluster, on the proxies of its peer
// links. A link a→b carries the TCP connections node a opens to node b's
// raft port: a's raft RPCs to b and b's replies, and the API calls a
// forwards to b (b leading) and their replies. A message from a to b is
// therefore either a request on link a→b (upstream) or a reply on link b→a
// (downstream): cutting "a to b" drops both, and b to a still flows.

// Link is the proxy node from dials to reach node to (nil: no such link).
func (c *Cluster) Link(from, to int) *Proxy {
	if !c.Raft() || from < 0 || to < 0 || from >= len(c.links) || to >= len(c.links) {
		return nil
	}
	return c.links[from][to]
}

// CutOneWay drops every message node from sends to node to (requests on
// link from→to, replies on link to→from), until HealLinks. Messages from
// to to from still flow.
func (c *Cluster) CutOneWay(from, to int) error {
	req, rep := c.Link(from, to), c.Link(to, from)
	if req == nil || rep == nil {
		return fmt.Errorf("chaos: no peer link between nodes %d and %d", from, to)
	}
	return errors.Join(req.Blackhole(Upstream), rep.Blackhole(Downstream))
}

// Cut drops every message between nodes a and b, both ways.
func (c *Cluster) Cut(a, b int) error {
	return errors.Join(c.CutOneWay(a, b), c.CutOneWay(b, a))
}

// Partition cuts the nodes in side from every other node (both ways); the
// links within each side flow. Partition([]int{i}) isolates node i.
func (c *Cluster) Partition(side []int) error {
	var errs []error
	for a := range c.Nodes {
		for b := a + 1; b < len(c.Nodes); b++ {
			if slices.Contains(side, a) != slices.Contains(side, b) {
				errs = append(errs, c.Cut(a, b))
			}
		}
	}
	return errors.Join(errs...)
}

// HealLinks removes every fault of every peer link (a connection that lost
// bytes is closed: raft dials again).
func (c *Cluster) HealLinks() error {
	var errs []error
	for _, row := range c.links {
		for _, p := range row {
			if p != nil {
				errs = append(errs, p.Heal())
			}
		}
	}
	return errors.Join(errs...)
}

// LinkFaults lists the peer links with a fault in place ("fence-1->fence-2:
// blackhole_upstream"), for logs and tests.
func (c *Cluster) LinkFaults() []string {
	var out []string
	for _, row := range c.links {
		for _, p := range row {
			if p == nil {
				continue
			}
			for _, t := range p.Toxics() {
				out = append(out, p.Name()+": "+t)
			}
		}
	}
	return out
}
