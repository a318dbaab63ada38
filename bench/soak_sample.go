package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SoakSample is one 10-second sample of the soak.
type SoakSample struct {
	At       time.Duration // since the load began
	Window   time.Duration // since the sample before
	Cycles   int           // cycles completed in the window
	Failed   int64         // cycles failed so far
	P50, P99 time.Duration // cycle latency over the window
	Leader   string        // the node that led when sampled ("" unknown)
	Load1    float64       // the box's 1-minute load average (/proc/loadavg): what else ran
	Nodes    []SoakNodeSample
}

// SoakNodeSample is one node in a sample. -1 where it could not be read
// (the node was down: killed and not ready again).
type SoakNodeSample struct {
	Pid          int
	RSS          int64   // /proc/PID/status VmRSS, bytes
	SnapBytes    int64   // fence_snapshot_bytes, or the newest snapshot in the data dir
	SnapWritten  int64   // bytes of snapshots written since the soak began (data-dir scan)
	SnapRate     float64 // bytes/s of snapshots written over the window
	OpIDs        int64   // fence_remembered_ids{kind="op_id"}
	OpIDsMax     int64   // fence_remembered_ids_max{kind="op_id"} (the cap)
	RequestIDs   int64   // fence_remembered_ids{kind="request_id"}
	IDMemBytes   int64   // fence_id_memory_bytes
	HeapInuse    int64   // go_memstats_heap_inuse_bytes
	DataDirBytes int64   // fence_data_dir_bytes
	Restarts     int     // restarts so far
}

func (s SoakSample) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "t=%s cycles/s=%.0f p50=%v p99=%v failed=%d load=%.1f", s.At.Round(time.Second), float64(s.Cycles)/s.Window.Seconds(),
		s.P50.Round(100*time.Microsecond), s.P99.Round(100*time.Microsecond), s.Failed, s.Load1)
	for i, n := range s.Nodes {
		fmt.Fprintf(&b, " | n%d rss=%.0fMiB snap=%.1fMB snapw=%.0fkB/s ids=%d idmem=%.1fMiB", i+1, mib(n.RSS), float64(n.SnapBytes)/1e6,
			n.SnapRate/1e3, n.OpIDs+max(n.RequestIDs, 0), mib(n.IDMemBytes))
	}
	return b.String()
}

func mib(b int64) float64 {
	if b < 0 {
		return -1
	}
	return float64(b) / (1 << 20)
}

// sampler takes the soak's samples.
type sampler struct {
	cfg  *SoakConfig
	cl   *soakCluster
	ld   *soakLoad
	t0   time.Time
	last time.Duration
	hc   *http.Client

	// seen[i]: the snapshot directories of node i already counted.
	seen     []map[string]bool
	written  []int64
	lastW    []int64
	mu       sync.Mutex
	restarts []int
}

func newSampler(cfg *SoakConfig, cl *soakCluster, ld *soakLoad, t0 time.Time) *sampler {
	s := &sampler{cfg: cfg, cl: cl, ld: ld, t0: t0, hc: &http.Client{Timeout: 2 * time.Second},
		seen: make([]map[string]bool, cl.n), written: make([]int64, cl.n), lastW: make([]int64, cl.n), restarts: make([]int, cl.n)}
	for i := range s.seen {
		s.seen[i] = map[string]bool{}
		s.scanSnapshots(i) // snapshots from before the load (none, or the start's) are not counted
		s.written[i] = 0
	}
	return s
}

func (s *sampler) noteRestart(r RestartRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, n := range s.cl.hc.Nodes() {
		if n.ID() == r.Node {
			s.restarts[i]++
		}
	}
}

func (s *sampler) sample(ctx context.Context) SoakSample {
	now := time.Since(s.t0)
	lats := s.ld.since(s.last, now)
	window := now - s.last
	s.last = now
	sortDurations(lats)
	out := SoakSample{At: now, Window: window, Cycles: len(lats), Failed: s.ld.failed.Load(), P50: percentile(lats, 0.5), P99: percentile(lats, 0.99),
		Load1: loadAvg()}
	for i, n := range s.cl.hc.Nodes() {
		ns := SoakNodeSample{Pid: -1, RSS: -1, SnapBytes: -1, OpIDs: -1, OpIDsMax: -1, RequestIDs: -1, IDMemBytes: -1, HeapInuse: -1, DataDirBytes: -1}
		s.scanSnapshots(i)
		ns.SnapWritten = s.written[i]
		ns.SnapRate = float64(s.written[i]-s.lastW[i]) / window.Seconds()
		s.lastW[i] = s.written[i]
		s.mu.Lock()
		ns.Restarts = s.restarts[i]
		s.mu.Unlock()
		if s.cl.up(i) {
			ns.Pid = n.Pid()
			ns.RSS = rssOf(ns.Pid)
			m := s.metrics(ctx, n.Addr())
			get := func(k string) int64 {
				if v, ok := m[k]; ok {
					return int64(v)
				}
				return -1
			}
			ns.SnapBytes = get("fence_snapshot_bytes")
			ns.OpIDs = get(`fence_remembered_ids{kind="op_id"}`)
			ns.OpIDsMax = get(`fence_remembered_ids_max{kind="op_id"}`)
			ns.RequestIDs = get(`fence_remembered_ids{kind="request_id"}`)
			ns.IDMemBytes = get("fence_id_memory_bytes")
			ns.HeapInuse = get("go_memstats_heap_inuse_bytes")
			ns.DataDirBytes = get("fence_data_dir_bytes")
			if m["fence_raft_state{state=\"leader\"}"] == 1 {
				out.Leader = n.ID()
			}
		}
		if ns.SnapBytes <= 0 { // none written since this start: the newest on disk
			ns.SnapBytes = newestSnapshot(n.DataDir())
		}
		out.Nodes = append(out.Nodes, ns)
	}
	return out
}

// scanSnapshots adds the snapshots of node i not seen before to its bytes
// written (state.bin and meta.json of each finished snapshot directory).
// A snapshot written and deleted between two scans is missed: nodes keep
// the last two, so only a node writing three within one sample would.
func (s *sampler) scanSnapshots(i int) {
	dir := filepath.Join(s.cl.hc.Node(i).DataDir(), "snapshots")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") || s.seen[i][e.Name()] {
			continue
		}
		s.seen[i][e.Name()] = true
		s.written[i] += dirBytes(filepath.Join(dir, e.Name()))
	}
}

func dirBytes(dir string) int64 {
	var n int64
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && !fi.IsDir() {
			n += fi.Size()
		}
	}
	return n
}

// newestSnapshot is the size of the newest finished snapshot in dataDir
// (0 if none).
func newestSnapshot(dataDir string) int64 {
	dir := filepath.Join(dataDir, "snapshots")
	ents, _ := os.ReadDir(dir)
	var newest string
	for _, e := range ents {
		if e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") && e.Name() > newest {
			newest = e.Name()
		}
	}
	if newest == "" {
		return 0
	}
	fi, err := os.Stat(filepath.Join(dir, newest, "state.bin"))
	if err != nil {
		return 0
	}
	return fi.Size()
}

// loadAvg is the 1-minute load average (-1 if unreadable).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// rssOf is VmRSS of pid in bytes (-1 if unreadable).
func rssOf(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return -1
}

// metrics scrapes GET /metrics of addr: series (name with labels as
// written) → value.
func (s *sampler) metrics(ctx context.Context, addr string) map[string]float64 {
	m := map[string]float64{}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return m
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return m
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err == nil {
			m[l[:i]] = v
		}
	}
	return m
}

var (
	reSnapRestored = regexp.MustCompile(`msg="snapshot restored".*?\bbytes=(\d+).*?\btook=(\S+)`)
	reLogReplayed  = regexp.MustCompile(`msg="log replayed".*?\bentries=(\d+).*?\btook=(\S+)`)
)

// reReplayParts: the parts of a start the node logs with `log replayed`
// (storage, raft_start, wait, apply; node.Node.logReplay).
var reReplayParts = regexp.MustCompile(`msg="log replayed".*?\b(storage=\S+ raft_start=\S+ wait=\S+ apply=\S+)`)

// restartParts is the parts of a start as the node logged them ("" if it
// did not).
func restartParts(log string) string {
	if m := reReplayParts.FindStringSubmatch(log); m != nil {
		return m[1]
	}
	return ""
}

// restartTimes reads a start's log for the node's own account of its
// restart: `snapshot restored` (bytes, took) and `log replayed` (entries,
// took).
func restartTimes(log string) (restore time.Duration, bytes int64, replay time.Duration, entries int64) {
	if m := reSnapRestored.FindStringSubmatch(log); m != nil {
		bytes, _ = strconv.ParseInt(m[1], 10, 64)
		restore, _ = time.ParseDuration(m[2])
	}
	if m := reLogReplayed.FindStringSubmatch(log); m != nil {
		entries, _ = strconv.ParseInt(m[1], 10, 64)
		replay, _ = time.ParseDuration(m[2])
	}
	return
}
