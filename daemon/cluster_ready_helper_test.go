package daemon

import "testing"

// readyCluster is three in-process members started with static peers,
// every one ready and one leading.
type readyCluster struct {
	cfgs     map[string]Config
	nodes    map[string]*runNode
	lead     *runNode
	follower *runNode // a member that does not lead
}

// startReadyCluster starts n1, n2 and n3 and waits until every member is
// ready and one of them leads.
func startReadyCluster(t *testing.T) *readyCluster {
	t.Helper()
	ids := []string{"n1", "n2", "n3"}
	peers, addrs := staticPeers(t, ids)
	c := &readyCluster{cfgs: map[string]Config{}, nodes: map[string]*runNode{}}
	for _, id := range ids {
		c.cfgs[id] = clusterConfig(t, id, ClusterConfig{RaftAddr: addrs[id], Peers: peers})
		c.nodes[id] = startRun(t, c.cfgs[id])
	}
	await(t, "a leader in office and every member ready", func() bool {
		c.lead, c.follower = nil, nil
		for _, id := range ids {
			st := c.nodes[id].status(t)
			if !st.GetReady() {
				return false
			}
			if st.GetRole() == "leader" {
				c.lead = c.nodes[id]
			} else {
				c.follower = c.nodes[id]
			}
		}
		return c.lead != nil
	})
	return c
}
