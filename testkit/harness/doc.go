// Package harness runs real Fence server processes for tests, the chaos
// harness (testkit/chaos) and the bench runner (bench/): it builds the
// fence binary once per process, starts `fence serve` on free loopback
// ports (the client port and, for a cluster node, --raft-addr) with its own
// data directory, waits for GET /readyz, and stops (SIGTERM), kills
// (SIGKILL), pauses (SIGSTOP), resumes (SIGCONT) and restarts it — on the
// same addresses and data directory, with other flags or environment if
// asked (Launch restarts without waiting for /readyz, for a node that
// cannot be ready). StartCluster starts n nodes as one raft cluster, either
// with a static --peers list or with --bootstrap and --join, and AddNode
// grows it; Cluster.Leader (LeaderOf for a caller's own node list) asks
// each node's ClusterService.NodeStatus and names the node that says it
// leads and that a majority of the members name; Transfer and RemoveMember
// change leadership and membership through any node.
//
// It is not a _test.go file so that three users share it: system_test (with
// the testing.TB helpers in testing.go), testkit/chaos and the bench/
// module (which may import it: bench's module path is under this module's,
// so the internal rule allows it).
//
// Everything here is real: processes, loopback sockets and signals. Waits
// are bounded (a start's ReadyTimeout, a stop's StopTimeout) so that a hung
// process turns into an error carrying the tail of its log, not a test
// binary killed by -timeout with nothing said. No wait here is a timing
// assertion.
//
// Partitions between nodes go through FENCE_TEST_DIAL_MAP (test-only, read
// by cmd/fence): every outgoing dial of a node to a mapped raft address goes
// to the mapped address instead. ClusterConfig.Link lets the caller put a
// proxy (testkit/chaos's Proxy) on each directed peer link; DialMap formats
// the variable.
package harness
