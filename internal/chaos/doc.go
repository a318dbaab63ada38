// Package chaos is Fence's Jepsen-style fault harness: it starts Fence as
// real processes in temp dirs on loopback, puts a fault-injecting TCP proxy
// (a small one of its own: see Proxy) between every client and every node,
// runs the seed's workload from worker processes against the built-in store
// and a PostgreSQL guard store, injects faults on a seeded schedule (the
// nemesis), records every operation with its invocation and completion time,
// and checks the history afterwards.
//
// The pieces, one a file:
//
//   - history.go: Op, the record of one logical operation (a JSON line), and
//     reading and writing histories;
//   - cluster.go: Node and Cluster, Fence server processes with their data
//     dirs (optionally on a size-limited tmpfs) and their proxies;
//   - proxy.go: Proxy, the fault-injecting proxy in front of a node;
//   - nemesis.go: Fault kinds, the seeded Schedule and its execution;
//   - worker.go, store_*.go: the worker loop run by `fence-chaos worker` in
//     its own process;
//   - check.go: the checkers (stale writes, token order, exclusion, lost
//     writes, double applies) and linear.go: linearizability with porcupine;
//   - run.go: Run, which ties them together and returns a Summary.
//
// A cluster (several nodes, partitions between them, clock skew) is added by
// giving Cluster more nodes and the nemesis more fault kinds; workers, the
// history and the checkers do not change.
package chaos
