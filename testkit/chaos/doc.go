// Package chaos is Fence's Jepsen-style fault harness: it starts Fence as
// real processes in temp dirs on loopback — one node, or a raft cluster of
// 3 or 5 — puts a fault-injecting TCP proxy (a small one of its own: see
// Proxy) between every client and every node and, in a cluster, on every
// directed peer link, runs the paused-worker story's workload from worker processes against
// the built-in store and a PostgreSQL guard store, injects faults on a seeded
// schedule (the nemesis), records every operation with its invocation and
// completion time, and checks the history afterwards.
//
// The pieces, one a file:
//
//   - history.go: Op, the record of one logical operation (a JSON line), and
//     reading and writing histories;
//   - cluster.go: Node and Cluster, Fence server processes (testkit/harness
//     Servers) with their data dirs (optionally on a size-limited tmpfs),
//     their client proxies and, for a cluster, the peer-link proxies that
//     each node's FENCE_TEST_DIAL_MAP routes it through;
//   - partition.go: cuts between nodes on the peer links (one way, both
//     ways, a side against the rest); members.go: the leader, leadership
//     transfer and membership over ClusterService;
//   - proxy.go: Proxy, the fault-injecting proxy;
//   - nemesis.go: Fault kinds, the seeded Schedule and its execution;
//     nemesis_cluster.go: the kinds of a cluster (the leader isolated, a
//     majority/minority split, one-way cuts, the leader paused or killed, a
//     follower killed, a skewed clock with leadership moved onto it, a
//     member removed and re-added); nemesis_restore.go: the restore (a
//     backup, every node killed, `fence restore` into a fresh data dir,
//     the cluster re-formed, the run goes on);
//   - worker.go, store_*.go: the worker loop run by `fence-chaos worker` in
//     its own process; its PostgreSQL writes send the lease's signed token
//     to a guard holding the cluster's key set (keys.go: GET /v1/keys,
//     fetched again on an unknown cluster or key id);
//     worker_boundaries.go: the lock-boundary workloads of issue 23
//     (`-workload`: the catalog pattern's SKU workers, holding the catalog
//     shared and their SKU exclusive as one set, and its import, holding
//     the catalog exclusive and writing every SKU; random overlapping sets
//     in random orders; permit holders), recording each acquire's set,
//     mode and permits, what a set's grant listed, and looks at a lock's
//     holders (Config.Boundaries, BoundaryMix);
//   - forger.go: the forger, in the harness's process, sending the same
//     guard forged tokens for the whole run (issue 22, G9);
//   - check.go: the checkers (stale writes, token order, exclusion by mode
//     — shared holds may overlap, an exclusive one overlaps nothing —, at
//     most N permit holders, a set held whole, early expiry on the host's
//     monotonic clock, lost writes, double applies; a set's acquire and
//     release are judged as one op on each of its locks) and
//     linear.go: linearizability with porcupine; check_forgery.go: the
//     forgeries accepted (checker 7); check_restore.go: the
//     built-in store's checks scoped to restore epochs, and each backup
//     checked against what came back;
//   - run.go: Run, which ties them together and returns a Summary.
package chaos
