package nodeview

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenceworks/fence/node"
)

// Metrics are the node's collectors on the server's /metrics: its
// status and counters read at each scrape, and histograms of its FSM
// batches and WAL fsyncs (observed through the node's hooks).
func Metrics(n *node.Node) []prometheus.Collector {
	batch := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "fence_raft_apply_batch_entries", Help: "Log entries applied per FSM batch (group commit).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 11),
	})
	fsync := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "fence_fsync_duration_seconds", Help: "Duration of each fsync of the raft log's WAL segment files (every acknowledged write waits for one).",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 18),
	})
	n.OnBatch(func(entries int) { batch.Observe(float64(entries)) })
	n.OnSync(func(d time.Duration) { fsync.Observe(d.Seconds()) })
	return []prometheus.Collector{batch, fsync, newNodeCollector(n)}
}

// raftStates are the values of fence_raft_state's state label (raft's
// states, lower case as NodeStatus reports them).
var raftStates = []string{"leader", "follower", "candidate", "shutdown"}

// nodeCollector reports what the node knows of itself, reading its status
// once per scrape (one read lock of the state for all of it; the held
// leases and the data dir size are a scan each).
type nodeCollector struct {
	n *node.Node

	sessions, leasesHeld, waiters, queued, lastToken, slack, oldestID, ready *prometheus.Desc
	resources, resourceBytes, dataDir, term, raftState, commit, applied      *prometheus.Desc
	failed                                                                   *prometheus.Desc
	ids, idsMax, idBytes, idNearCap, snapBytes                               *prometheus.Desc
	startSeconds, startEntries                                               *prometheus.Desc
	proposals, groups, ticks, grants, busy, stale, releases, expiries        *prometheus.Desc
}

func newNodeCollector(n *node.Node) *nodeCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &nodeCollector{n: n,
		sessions:      d("fence_sessions", "Client sessions the store holds (expired ones not yet settled included)."),
		leasesHeld:    d("fence_leases_held", "Locks held now (leader clock; on a node not in office, at the server time of the last command it applied)."),
		waiters:       d("fence_waiters", "Blocking acquires waiting on this node."),
		queued:        d("fence_queued", "Acquires queued in the store, on every lock (whichever node their clients wait on)."),
		lastToken:     d("fence_last_token", "Last fencing token issued."),
		slack:         d("fence_expiry_slack_seconds", "How far expiry decisions lag the leader clock to cover commit latency (G3): leases last this much longer than their TTL."),
		oldestID:      d("fence_oldest_remembered_id_age_seconds", "Age in server time of the oldest remembered op_id or request_id: how far back a retry is still recognised (at least --min-id-retention once the id memory is full)."),
		ids:           d("fence_remembered_ids", "op_ids and request_id outcomes remembered now (the id memory: --max-ids, docs/operations.md).", "kind"),
		idsMax:        d("fence_remembered_ids_max", "Cap of the id memory of each kind (max_ops, max_requests): at it, new ids are refused while the oldest is younger than min_id_retention.", "kind"),
		idBytes:       d("fence_id_memory_bytes", "Heap the id memories hold (rings, indexes, principals' queues; a request outcome's names are shared with its lock and not counted)."),
		idNearCap:     d("fence_id_memory_near_cap", "1 while an id memory is at least 90% of its cap (logged when it gets there; 0 again below 80%)."),
		snapBytes:     d("fence_snapshot_bytes", "Size of the last snapshot this node wrote (0 before its first since it started)."),
		startSeconds:  d("fence_start_seconds", "This process's start, by part, once the log it held at start was applied (absent before): storage (opening the WAL), raft (raft's start with the snapshot restore), wait (until the first log entry was applied: an election or the leader's commit index), apply (applying the log after the snapshot), total (from the start of opening to the last entry applied).", "part"),
		startEntries:  d("fence_start_replayed_entries", "Log entries after the restored snapshot that this process applied at its start (absent before they were)."),
		ready:         d("fence_ready", "1 when the node can serve (/readyz): a leader in office that applied all it committed, or a follower that knows its leader and applied all it knows committed."),
		resources:     d("fence_resources", "Fenced resources the built-in store holds (deleted ones kept as tombstones included, as max_resources counts them)."),
		resourceBytes: d("fence_resource_bytes", "Bytes of the fenced resources' values (as max_resource_bytes counts them)."),
		dataDir:       d("fence_data_dir_bytes", "Bytes the data dir takes on disk (raft log, snapshots), as the file system allocated them."),
		term:          d("fence_raft_term", "Raft's current term (it rises with every election)."),
		raftState:     d("fence_raft_state", "Raft state of this node: 1 for the current one.", "state"),
		commit:        d("fence_raft_commit_index", "Raft's commit index as this node knows it."),
		applied:       d("fence_raft_applied_index", "Last log index this node applied to its state."),
		failed:        d("fence_storage_failed", "1 when a durable write failed and the node stopped (fail-stop: it serves nothing until restarted)."),
		proposals:     d("fence_proposals_total", "Commands this node proposed (fence_proposals_total / fence_proposal_groups_total is the mean group-commit size)."),
		groups:        d("fence_proposal_groups_total", "Raft log entries the proposed commands were grouped into (group commit)."),
		ticks:         d("fence_ticks_total", "Expiry ticks proposed by this node."),
		grants:        d("fence_grants_total", "Leases granted (at once or to a queued acquire), counted as this node applied them since it started."),
		busy:          d("fence_busy_total", "Acquires refused BUSY, at once or when their wait ran out, as this node applied them since it started."),
		stale:         d("fence_stale_refusals_total", "Operations refused for a token no longer good (a fenced write, add, delete, renew or release), by reason, as this node applied them since it started.", "reason"),
		releases:      d("fence_releases_total", "Leases ended before their time without expiring: a release by the holder (a refused release counts nothing), each lease of a session its client closed, a queued acquire's grant withdrawn because its client was gone (cancelled or disconnected as the grant came, or not back within the waiter grace after a leader change); as this node applied them since its process started."),
		expiries:      d("fence_expiries_total", "Leases that expired (their TTL or their session ran out in server time), as this node applied them since it started."),
	}
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.sessions, c.leasesHeld, c.waiters, c.queued, c.lastToken, c.slack, c.oldestID, c.ready,
		c.resources, c.resourceBytes, c.dataDir, c.term, c.raftState, c.commit, c.applied, c.failed,
		c.proposals, c.groups, c.ticks, c.grants, c.busy, c.stale, c.releases, c.expiries, c.ids, c.idsMax, c.idBytes, c.idNearCap, c.snapBytes, c.startSeconds, c.startEntries} {
		ch <- d
	}
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.n.Status()
	ev := c.n.Counters()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	bit := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	gauge(c.sessions, float64(st.Sessions))
	gauge(c.leasesHeld, float64(c.n.HeldLeases()))
	gauge(c.waiters, float64(st.Waiters))
	gauge(c.queued, float64(st.Queued))
	gauge(c.lastToken, float64(st.LastToken))
	gauge(c.slack, st.Slack.Seconds())
	gauge(c.oldestID, st.OldestIDAge.Seconds())
	gauge(c.ids, float64(st.IDMemory.Ops), "op_id")
	gauge(c.ids, float64(st.IDMemory.Requests), "request_id")
	gauge(c.idsMax, float64(st.IDMemory.MaxOps), "op_id")
	gauge(c.idsMax, float64(st.IDMemory.MaxRequests), "request_id")
	gauge(c.idBytes, float64(st.IDMemory.Bytes))
	gauge(c.idNearCap, bit(st.IDMemoryNearCap))
	gauge(c.snapBytes, float64(st.SnapshotBytes))
	if s := st.LastStart; s != nil {
		for _, p := range []struct {
			part string
			d    time.Duration
		}{{"storage", s.Storage}, {"raft", s.RaftStart}, {"wait", s.Wait}, {"apply", s.Apply}, {"total", s.Total}} {
			gauge(c.startSeconds, p.d.Seconds(), p.part)
		}
		gauge(c.startEntries, float64(s.Entries))
	}
	gauge(c.ready, bit(st.Ready()))
	gauge(c.resources, float64(st.Resources))
	gauge(c.resourceBytes, float64(st.ResourceBytes))
	if b, err := c.n.DataDirBytes(); err == nil {
		gauge(c.dataDir, float64(b))
	}
	gauge(c.term, float64(st.Term))
	role := strings.ToLower(st.Role)
	for _, s := range raftStates {
		gauge(c.raftState, bit(s == role), s)
	}
	gauge(c.commit, float64(st.CommitIndex))
	gauge(c.applied, float64(st.AppliedIndex))
	gauge(c.failed, bit(st.Fatal != nil))
	counter(c.proposals, st.Proposals)
	counter(c.groups, st.Groups)
	counter(c.ticks, st.Ticks)
	counter(c.grants, ev.Grants)
	counter(c.busy, ev.Busy)
	for _, r := range node.StaleReasons {
		counter(c.stale, ev.Stale[r], string(r))
	}
	counter(c.releases, ev.Releases)
	counter(c.expiries, ev.Expiries)
}
