package cluster

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/node"
)

// joinAttemptTimeout bounds one AddMember call of Join: the leader answers
// once the new configuration commits, which takes a round trip to a
// majority; a node that takes longer is asked again (adding is idempotent).
const joinAttemptTimeout = 5 * time.Second

// Join backoff between rounds over all URLs.
const (
	joinBackoffMin = 100 * time.Millisecond
	joinBackoffMax = 2 * time.Second
)

// ParseJoinURLs parses --join's comma-separated list of other nodes' client
// URLs (http://host:port). field names the flag in errors.
func ParseJoinURLs(field, s string) ([]string, error) {
	var urls []string
	for _, u := range strings.Split(s, ",") {
		u = strings.TrimSuffix(strings.TrimSpace(u), "/")
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Hostname() == "" || p.Path != "" || p.RawQuery != "" {
			return nil, fence.Invalid(field, "a comma-separated list of other nodes' URLs (http://HOST:PORT)", u)
		}
		if !slices.Contains(urls, u) {
			urls = append(urls, u)
		}
	}
	return urls, nil
}

// Join makes this node a voter: it asks the nodes at urls, in turn, to add
// it (AddMember with its id and raft address; a follower forwards it to
// the leader), round after round, until one does, this node finds itself
// in the configuration (an earlier call's reply was lost), or ctx ends. A
// refusal that no retry can change (an invalid id or address, a target that
// runs alone) ends it at once. A node already in the configuration (a
// restart with its data dir) asks nobody.
func (m *Membership) Join(ctx context.Context, urls []string) error {
	if m.single() {
		return ErrSingleNode
	}
	if len(urls) == 0 {
		return errors.New("join: no URL to ask")
	}
	if m.joinPeer == nil {
		return errors.New("join: no Config.Join to ask other nodes with")
	}
	id := m.node.ID()
	m.expectAdd.Store(true)
	member := m.member(ctx)
	fresh := m.node.StartedEmpty()
	if member && !fresh {
		m.log.Info("join: already a member (raft state in the data dir); not asking", "id", id)
		return nil
	}
	// A node without raft state says so: the leader refuses it if its id
	// is a member already (its data was lost; see AddMemberRequest.fresh).
	// Such a node does not take finding itself in the configuration for
	// being added either — the leader reaches a lost voter's address by
	// itself — it asks until the leader answers.
	req := AddMemberRequest{ID: id, RaftAddr: m.addr, Fresh: fresh, JoinID: rand.Text()}
	last := make(map[string]error, len(urls))
	backoff := joinBackoffMin
	for round := 1; ; round++ {
		for _, u := range urls {
			actx, cancel := context.WithTimeout(ctx, joinAttemptTimeout)
			err := m.joinPeer(u).AddMember(actx, req)
			cancel()
			if err == nil {
				m.log.Info("join: added as a voter", "id", id, "raft_addr", m.addr, "via", u, "rounds", round)
				return nil
			}
			if errors.As(err, new(*RefusedError)) {
				return fmt.Errorf("join: %s refused to add %s at %s: %w", u, id, m.addr, err)
			}
			last[u] = err
			if ctx.Err() != nil {
				break
			}
		}
		if !fresh && m.member(ctx) {
			m.log.Info("join: found itself in the configuration", "id", id)
			return nil
		}
		m.log.Info("join: not added yet; asking again", "round", round, "backoff", backoff)
		select {
		case <-ctx.Done():
			var why []string
			for _, u := range urls {
				if err := last[u]; err != nil {
					why = append(why, u+": "+err.Error())
				}
			}
			return fmt.Errorf("join: no node added %s (%s) in time (%w); last answers: %s", id, m.addr, ctx.Err(), strings.Join(why, "; "))
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, joinBackoffMax)
	}
}

// member reports whether this node is in the latest configuration it
// knows. Whether it started without raft state is node.StartedEmpty: a
// leader may reach an empty node at a lost voter's address (and replicate
// its configuration to it) before this node looks.
func (m *Membership) member(ctx context.Context) bool {
	conf, err := m.node.Members(ctx)
	if err != nil {
		return false
	}
	id := m.node.ID()
	return slices.ContainsFunc(conf, func(c node.Member) bool { return c.ID == id })
}

// FreshPoll is how often WatchFresh looks at the configuration.
const FreshPoll = 100 * time.Millisecond

// WatchFresh watches a node that started without raft state until it finds
// itself in the configuration, and logs an error if nobody added it while
// it ran: it neither asked to join (Join) nor was asked for its status by
// a leader about to add it (NodeStatus with adding). That is a voter whose
// data dir was lost, brought back by the leader at its old address — an
// empty voter that forgot its log and its votes, which raft's safety
// rests on. It returns when ctx ends, at once for a node with raft state.
func (m *Membership) WatchFresh(ctx context.Context) {
	if m.single() {
		return
	}
	if !m.node.StartedEmpty() {
		return
	}
	tick := time.NewTicker(FreshPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !m.member(ctx) {
			continue
		}
		if !m.expectAdd.Load() {
			id := m.node.ID()
			m.log.Error("this node started with an empty data dir and is a voter, though nobody added it while it ran: "+
				"was it a member whose data dir was lost? A voter that forgot its log and votes breaks raft's guarantees: "+
				"stop it, remove it (fence members remove "+id+"), then start it with --join", "id", id, "raft_addr", m.addr)
		}
		return
	}
}
