package bench

import (
	"strings"
	"time"
)

// clusterServers describes the clusters of a -cluster run.
func (r *Report) clusterServers(p func(string, ...any)) {
	c := r.Config
	flags := func(fs []string) string {
		if len(fs) == 0 {
			return "none"
		}
		return "`" + strings.Join(fs, " ") + "`"
	}
	p("- Servers: %d processes per cluster on loopback, each with its own temp data dir. ", c.Cluster)
	p("Fence: `fence serve --node-id fence-N --raft-addr 127.0.0.1:PORT --peers fence-1=…,fence-2=…,fence-3=…` (a static cluster; raft over TCP on each node's raft port; ")
	p("a follower forwards every call to the leader; the leader fsyncs its log and commits once a majority has it), raft timeouts at their cluster defaults unless the extra flags say otherwise ")
	p("(`--heartbeat-timeout 500ms --election-timeout 1s --leader-lease-timeout 500ms --commit-timeout 10ms`); extra flags: %s. ", flags(c.ClusterFlags.Fence))
	p("etcd: `bench/cmd/etcdserver --name etcd-N --initial-cluster etcd-1=…,…` (embedded etcd, fsync per commit on every member), ")
	p("heartbeat 100 ms and election timeout 1000 ms (etcd's defaults) unless the extra flags say otherwise; extra flags: %s. ", flags(c.ClusterFlags.Etcd))
	p("Redis is not in the cluster runs (no consensus: its replication is asynchronous).\n")
}

// failoverMarkdown renders the failover runs.
func (r *Report) failoverMarkdown(p func(string, ...any)) {
	c := r.Config
	p("### Failover: kill -9 of the leader → first grant\n\n")
	p("%d runs per system, systems interleaved, a fresh %d-node cluster each run. A client of the system with every node as an endpoint, the leader's first (the Fence client sticks to the first endpoint that works, so it talks to the node that dies; etcd's client balances over all) ", c.Failover, c.Cluster)
	p("does 5 acquire → release cycles; then the runner sends the leader SIGKILL, and from that instant the client is sent a try-acquire (no wait) of a fresh lock every %v, each left to finish on its own (none waits for an earlier one: a call stuck on a node without a leader would otherwise measure its own timeout), until one is granted. ", probeEvery)
	p("**kill → grant** is the time from the signal to the first grant's reply; **granted probe sent** is when that probe was sent, after the kill; **kill → new leader** is when a surviving node first reported itself the leader ")
	p("(each node asked every 20 ms: Fence `ClusterService.NodeStatus`, role leader and ready — in office; etcd `Maintenance.Status`). Times in ms, median (min–max).\n\n")
	p("| system | runs | kill → grant | granted probe sent | kill → new leader | probes sent until the grant (median) | first error seen |\n")
	p("|---|---:|---:|---:|---:|---:|---|\n")
	mmm := func(xs []float64) string {
		if len(xs) == 0 {
			return "—"
		}
		lo, hi := minMax(xs)
		return ms(time.Duration(median(xs))) + " (" + ms(time.Duration(lo)) + "–" + ms(time.Duration(hi)) + ")"
	}
	for _, sys := range r.Systems {
		var g, st, e, a []float64
		first := ""
		for _, x := range r.Failover {
			if x.System != sys {
				continue
			}
			g, st, a = append(g, float64(x.Grant)), append(st, float64(x.Started)), append(a, float64(x.Attempts))
			if x.Elected > 0 {
				e = append(e, float64(x.Elected))
			}
			if first == "" && x.FirstErr != "" {
				first = x.FirstErr
			}
		}
		if len(g) == 0 {
			p("| %s | 0 | failed |||||\n", sys)
			continue
		}
		p("| %s | %d | %s | %s | %s | %.0f | %s |\n", sys, len(g), mmm(g), mmm(st), mmm(e), median(a), mdCell(oneLine(first)))
	}
	p("\n")
}

func minMax(xs []float64) (lo, hi float64) {
	for i, x := range xs {
		if i == 0 || x < lo {
			lo = x
		}
		if i == 0 || x > hi {
			hi = x
		}
	}
	return lo, hi
}

// mdCell makes s safe in a markdown table cell.
func mdCell(s string) string {
	if s == "" {
		return "—"
	}
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return strings.ReplaceAll(s, "|", "\\|")
}
