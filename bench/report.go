package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// Markers delimit the section of docs/benchmarks.md that the runner
// rewrites; everything outside them is kept as it is.
const (
	BeginMarker = "<!-- bench:begin -->"
	EndMarker   = "<!-- bench:end -->"
)

// Env describes the machine and the versions measured.
type Env struct {
	CPUs, CPUModel, Kernel, Go, FenceCommit, Etcd, Redis string
}

// Environment reads the machine and versions for the report.
func Environment(cfg Config) Env {
	e := Env{CPUs: fmt.Sprint(runtime.NumCPU()), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				e.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		e.Kernel = strings.TrimSpace(string(b))
	}
	out := func(dir string, name string, args ...string) string {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		b, err := cmd.Output()
		if err != nil {
			return "unknown"
		}
		return strings.TrimSpace(string(b))
	}
	e.FenceCommit = out(cfg.Repo, "git", "rev-parse", "--short", "HEAD")
	if s := out(cfg.Repo, "git", "status", "--porcelain", "--untracked-files=no"); s != "" && s != "unknown" {
		e.FenceCommit += " (plus uncommitted changes in the checkout)"
	}
	if cfg.FenceVersion != "" {
		e.FenceCommit = cfg.FenceVersion
	}
	e.Etcd = "unknown"
	if b, err := os.ReadFile(cfg.BenchDir + "/go.mod"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) >= 2 && f[0] == "go.etcd.io/etcd/server/v3" {
				e.Etcd = f[1] + " (embedded, bench/cmd/etcdserver)"
			}
		}
	}
	if v := out("", cfg.RedisBin, "--version"); v != "unknown" {
		for _, f := range strings.Fields(v) {
			if strings.HasPrefix(f, "v=") {
				e.Redis = strings.TrimPrefix(f, "v=")
			}
		}
	}
	return e
}

func ms(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < time.Millisecond:
		return fmt.Sprintf("%.2f", float64(d)/1e6)
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.1f", float64(d)/1e6)
	}
	return fmt.Sprintf("%.0f", float64(d)/1e6)
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// num formats with thousands separators.
func num(f float64) string {
	n := int64(f + 0.5)
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func mb(b int64) string { return fmt.Sprintf("%.0f", float64(b)/(1<<20)) }

func medDur(ds []time.Duration) time.Duration {
	f := make([]float64, len(ds))
	for i, d := range ds {
		f[i] = float64(d)
	}
	return time.Duration(median(f))
}

// rangeOf is "min–max" of xs, or "" for fewer than two.
func rangeOf(xs []float64) string {
	if len(xs) < 2 {
		return ""
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return " (" + num(lo) + "–" + num(hi) + ")"
}

// fenceRefs are the Fence systems ratios are computed for, in the report.
func fenceRefs(r *Report) []string {
	var refs []string
	for _, s := range r.Systems {
		if strings.HasPrefix(s, "fence-") {
			refs = append(refs, s)
		}
	}
	return refs
}

// ratio is the median over rounds of ref's value ÷ sys's value in the same
// round (rounds where either is missing or zero are skipped).
func ratio(byRound map[string]map[int]float64, ref, sys string) string {
	var rs []float64
	for round, v := range byRound[sys] {
		if f, ok := byRound[ref][round]; ok && v > 0 && f > 0 {
			rs = append(rs, f/v)
		}
	}
	if len(rs) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", median(rs))
}

// Markdown renders the report as the section docs/benchmarks.md holds
// between the markers.
func (r *Report) Markdown(env Env, command string) string {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	c := r.Config
	refs := fenceRefs(r)
	onlyBoundaries := len(r.W1)+len(r.W2)+len(r.W3)+len(r.W4)+len(r.W5)+len(r.Failover) == 0 && len(r.W6)+len(r.W7) > 0
	switch {
	case onlyBoundaries:
		p("## Lock boundaries against etcd: election hand-off, an order's 3 SKUs (issue 23, `bench/`)\n\n")
	case c.Cluster > 1:
		p("## %d-node Fence against %d-node etcd (issue 9, `bench/`)\n\n", c.Cluster, c.Cluster)
	default:
		p("## Fence against etcd and Redis (issue 7, `bench/`)\n\n")
	}
	p("Written by `bench/cmd/fencebench` (mode `%s`); rerun it to replace this section.\n\n", c.Mode)
	p("- Machine: %s CPUs (`nproc`), `%s`, kernel %s, %s. Everything — servers and clients — shares these cores.\n", env.CPUs, env.CPUModel, env.Kernel, env.Go)
	p("- Date: %s (run took %s).\n", r.Started.Format("2006-01-02 15:04 UTC"), r.Finished.Sub(r.Started).Round(time.Second))
	p("- Versions: fence commit `%s`; etcd %s; redis-server %s.\n", env.FenceCommit, env.Etcd, env.Redis)
	p("- Command: `%s`\n", command)
	if c.Cluster > 1 {
		r.clusterServers(p)
	} else if onlyBoundaries {
		p("- Servers: each in its own process on loopback with a temp data dir — `fence serve` (raft log, fsync before every reply); etcd (single member, fsync per commit).\n")
	} else {
		p("- Servers: each in its own process on loopback with a temp data dir — `fence serve` (raft log, fsync before every reply); ")
		p("etcd (single member, fsync per commit); `redis-server --appendonly yes --appendfsync always` (redis-always) and `--appendfsync everysec` (redis-everysec, may lose the last second on a crash), `--save \"\"`.\n")
	}
	p("- Clients, each system's own Go client: fence-unary = package `client` with `WithoutSession()` (one unary Connect call per operation over HTTP/1.1 keep-alive, a background keepalive per lease); fence-session = package `client` as it is by default: one session per `client.Client` (a Client per worker, at most %d; session TTL %d s), every call and keepalive on its one h2c stream, session-bound leases (Acquire without TTL); fence-lean = fence-session with the session's stream on the server's lean session port (`fence serve --session-addr`, `client.WithLeanSessions`: Fence's own length-prefixed protobuf framing over TCP, one reader and one writer per connection, replies coalesced) instead of HTTP/2, to a server of its own; fence-session-tls = fence-session over TLS (HTTP/2, ALPN h2) to a server started with `--cert-file`/`--key-file` (certificates from `fence cert`); fence-session-tls-auth = fence-session-tls with authentication on (`fence auth enable`): every call carries a bearer token (`client.WithBearerToken`) whose role may lock, read and write every name; ", maxSessions, sessionTTL)
	p("etcd = `concurrency.Mutex` on a `concurrency.Session` (one `clientv3.Client`; a session per worker, at most %d); ", maxSessions)
	if c.Cluster > 1 {
		if !EndpointsInOrder {
			p("Fence's clients find the leader themselves (`NodeStatus` of every endpoint before the first call) and put their sessions and calls there, whatever the order below; with `-fence-in-order` (`client.WithEndpointsInOrder`) they keep to the first endpoint listed. ")
		}
		if c.ViaFollower {
			p("every node of the cluster is an endpoint of the client, **a follower's first** (`-via-follower`; Fence: `client.New(\"http://follower,http://leader,http://other\")`: the client sticks to the follower, which forwards every call to the leader over its raft port; etcd: `clientv3.Config.Endpoints`, gRPC round-robin over all three).\n")
		} else {
			p("every node of the cluster is an endpoint of the client, the leader's first (Fence: `client.New(\"http://leader,http://f1,http://f2\")`, which uses one endpoint at a time, sticks to the one that works and moves on when it fails — so its calls go to the leader, none is forwarded; etcd: `clientv3.Config.Endpoints`, gRPC round-robin over all three, so about two calls in three reach a follower, which hands the proposal to the leader).\n")
		}
	} else {
		p("Redis = `SET key random NX PX ttl`, release by a Lua compare-and-delete, waiting by polling every %v–%v (go-redis v9). ", c.RedisRetry, 2*c.RedisRetry)
		p("**Redis has no fencing token**: its \"fenced write\" below is a plain `SET` a stale owner can still make.\n")
	}
	if len(r.W6)+len(r.W7) > 0 {
		p("- Workloads 6 and 7 (lock boundaries) run fence-unary, fence-session and etcd only (the systems with `Boundaries()`, bench/boundaries.go), every system once per round, %d rounds, each on a server of its own kind started for them.\n", c.Rounds)
	}
	if !contains(r.Systems, "fence-session") {
		p("- fence-session (the session path of the Go client) is not in this run (`-systems`).\n")
	}
	wl := "1–3"
	if onlyBoundaries {
		wl = "6–7"
	}
	p("- Workloads %s run every system once per round, in the order %s, %d rounds; the tables show medians over rounds, the range of ops/s in brackets, and ", wl, strings.Join(r.Systems, ", "), c.Rounds)
	p("**\"X ÷ this\"** = the median over rounds of X's ops/s divided by this system's ops/s *in the same round* (> 1: X is faster). ")
	if c.Cluster > 1 {
		p("Server CPU = utime+stime of all %d server processes together (`/proc/PID/stat`) over the timed window, per 10,000 operations.\n\n", c.Cluster)
	} else {
		p("Server CPU = utime+stime of the server process (`/proc/PID/stat`) over the timed window, per 10,000 operations.\n\n")
	}

	ratioCols := func() string {
		var s string
		for _, ref := range refs {
			s += " " + ref + " ÷ this |"
		}
		return s
	}
	sep := func(n int) string { return strings.Repeat("---:|", n) }

	opsTable := func(results []OpsResult, clients []int) {
		extra, nextra := "", 0
		if c.Cluster > 1 {
			extra, nextra = " leader's CPU-s / 10k | client CPU-s / 10k |", 2
		}
		p("| clients | system | ops/s | p50 ms | p99 ms | p99.9 ms | server CPU-s / 10k |%s%s errors |\n", extra, ratioCols())
		p("|---:|---|%s\n", sep(5+nextra+len(refs)+1))
		for _, n := range clients {
			byRound := map[string]map[int]float64{}
			for _, res := range results {
				if res.Clients == n {
					if byRound[res.System] == nil {
						byRound[res.System] = map[int]float64{}
					}
					byRound[res.System][res.Round] = res.OpsPerSec
				}
			}
			for _, sys := range r.Systems {
				var ops, cpu, lcpu, ccpu []float64
				var p50, p99, p999 []time.Duration
				errs := 0
				first := ""
				for _, res := range results {
					if res.Clients != n || res.System != sys {
						continue
					}
					ops, cpu = append(ops, res.OpsPerSec), append(cpu, res.CPUPer10k)
					lcpu, ccpu = append(lcpu, res.LeaderCPUPer10k), append(ccpu, res.ClientCPUPer10k)
					p50, p99, p999 = append(p50, res.P50), append(p99, res.P99), append(p999, res.P999)
					errs += res.Errors
					if first == "" {
						first = res.FirstErr
					}
				}
				if len(ops) == 0 {
					p("| %d | %s | failed |||||%s |\n", n, sys, strings.Repeat(" |", len(refs)+nextra))
					continue
				}
				p("| %d | %s | %s%s | %s | %s | %s | %.2f |", n, sys, num(median(ops)), rangeOf(ops), ms(medDur(p50)), ms(medDur(p99)), ms(medDur(p999)), median(cpu))
				if nextra > 0 {
					p(" %.2f | %.2f |", median(lcpu), median(ccpu))
				}
				for _, ref := range refs {
					if ref == sys {
						p(" — |")
					} else {
						p(" %s |", ratio(byRound, ref, sys))
					}
				}
				p(" %d |\n", errs)
			}
		}
		p("\n")
	}

	if len(r.W1) > 0 {
		p("### 1. Uncontended acquire → release\n\n")
		p("Each client loops acquire → release on its own lock (no two clients share one) for %v per run, after 3 warm-up cycles; latency is the acquire's. ", c.W1Duration)
		p("Fence and Redis: TTL 10 s; etcd: the session's lease (TTL %d s).\n\n", sessionTTL)
		opsTable(r.W1, c.W1Clients)
	}
	if len(r.W2) > 0 {
		p("### 2. Acquire → fenced write → release\n\n")
		p("As 1, with a 32-byte write between acquire and release: Fence `Client.Write` with the lease's token to the built-in store (refused for a stale token); ")
		p("etcd a `Txn().If(mutex.IsOwner()).Then(OpPut)`; Redis a plain `SET` (**unfenced**). ops/s counts whole cycles; latency is still the acquire's.\n\n")
		opsTable(r.W2, c.W2Clients)
	}
	if len(r.W3) > 0 {
		p("### 3. %d clients handing one lock around\n\n", c.W3Clients)
		p("Every client loops acquire (waiting: Fence's FIFO queue, etcd's revision order, Redis polling) → release on one lock for %v per run. ", c.W3Duration)
		p("Fairness = fewest ÷ most grants of one client in the run (median over rounds).\n\n")
		p("| system | grants/s | p50 wait ms | max wait ms | fairness | server CPU-s / 10k |%s errors |\n", ratioCols())
		p("|---|%s\n", sep(5+len(refs)+1))
		byRound := map[string]map[int]float64{}
		for _, res := range r.W3 {
			if byRound[res.System] == nil {
				byRound[res.System] = map[int]float64{}
			}
			byRound[res.System][res.Round] = res.GrantsPerSec
		}
		for _, sys := range r.Systems {
			var g, fair, cpu []float64
			var p50, mx []time.Duration
			errs := 0
			for _, res := range r.W3 {
				if res.System == sys {
					g, fair, cpu = append(g, res.GrantsPerSec), append(fair, res.Fairness), append(cpu, res.CPUPer10k)
					p50, mx = append(p50, res.P50Wait), append(mx, res.MaxWait)
					errs += res.Errors
				}
			}
			if len(g) == 0 {
				p("| %s | failed |||||%s |\n", sys, strings.Repeat(" |", len(refs)))
				continue
			}
			p("| %s | %s%s | %s | %s | %.2f | %.2f |", sys, num(median(g)), rangeOf(g), ms(medDur(p50)), ms(medDur(mx)), median(fair), median(cpu))
			for _, ref := range refs {
				if ref == sys {
					p(" — |")
				} else {
					p(" %s |", ratio(byRound, ref, sys))
				}
			}
			p(" %d |\n", errs)
		}
		p("\n")
	}
	if len(r.W4) > 0 {
		p("### 4. %s leases held at once\n\n", num(float64(c.W4N)))
		p("A fresh server per run; a child process of the runner acquires the leases with %d concurrent acquirers and holds them; ", c.W4Workers)
		p("then the runner reads VmRSS of the server and of that client process (`/proc/PID/status`). ")
		p("How each holds them: fence-unary — one lease per lock, TTL 1 h, **keepalive off** (`client.KeepAlive(-1)`; the unary client has no cheaper way: with keepalive on, each lease is a goroutine and a renew every TTL/3); ")
		p("fence-session — session-bound leases on %d sessions (one per acquirer's Client), each kept alive by one keepalive; ", min(c.W4Workers, maxSessions))
		p("etcd — a mutex per lock on %d sessions (leases) kept alive by the client; Redis — one key per lock with PX 1 h. %d round(s).\n\n", min(c.W4Workers, maxSessions), c.W4Rounds)
		p("| system | held | time to grant all | grants/s | server RSS MB (empty → held) | client RSS MB | client peak MB | server CPU-s / 10k | errors |\n")
		p("|---|%s\n", sep(8))
		for _, sys := range r.Systems {
			var rows []HeldResult
			for _, res := range r.W4 {
				if res.System == sys {
					rows = append(rows, res)
				}
			}
			if len(rows) == 0 {
				p("| %s | failed |||||||\n", sys)
				continue
			}
			var held, rate, cpu, sb, sa, cr, cp []float64
			var grant []time.Duration
			errs := 0
			first := ""
			for _, h := range rows {
				held, rate, cpu = append(held, float64(h.Held)), append(rate, h.GrantsPerSec), append(cpu, h.CPUPer10k)
				sb, sa = append(sb, float64(h.ServerRSSBefore)), append(sa, float64(h.ServerRSS))
				cr, cp = append(cr, float64(h.ClientRSS)), append(cp, float64(h.ClientPeak))
				grant = append(grant, h.Grant)
				errs += h.Errors
				if first == "" {
					first = h.FirstErr
				}
			}
			p("| %s | %s | %s | %s | %s → %s | %s | %s | %.2f | %d |\n", sys, num(median(held)), secs(medDur(grant)), num(median(rate)),
				mb(int64(median(sb))), mb(int64(median(sa))), mb(int64(median(cr))), mb(int64(median(cp))), median(cpu), errs)
		}
		p("\n")
	}
	if len(r.W5) > 0 {
		p("### 5. Expiry storm: %s leases expire, one waiter queued on each\n\n", num(float64(c.W5N)))
		p("A fresh server per run. One child process of the runner acquires the leases (%d acquirers); a second one queues one waiting acquire on each lock (a goroutine per waiter) ", c.W5Workers)
		p("and reports when the server shows them all queued. Then the holder stops renewing and is killed (SIGKILL), and the clock starts when the holders' TTL ends: ")
		p("fence-unary and Redis — every lease was acquired with a TTL ending at one instant, set so that the set-up fits before it; ")
		p("etcd — the holders' %d sessions (TTL %d s) are orphaned (`Session.Orphan`: no more keepalives, no revoke) and the TTL end is the latest of their leases' remaining TTL (`TimeToLive`); ", min(c.W5Workers, maxSessions), c.W5EtcdTTL)
		p("fence-session — the holders' %d sessions (TTL %d s) stop with the process; the TTL end is the latest safe deadline the client computed from its last keepalive (send time + remaining × 0.99: at most 1%% of the TTL before the server's expiry). ", min(c.W5Workers, maxSessions), c.W5EtcdTTL)
		p("Redis waiters poll every %v–%v (no queue). \"overran\" = the TTL ended before every waiter was queued (the run then measures less than the full storm). Client peak RSS is the waiters' process.\n\n", c.RedisStormRetry, 2*c.RedisStormRetry)
		p("| system | waiters granted | TTL end → all hold | p50 | p99 | set-up | overran | server peak RSS MB | client peak RSS MB | errors |\n")
		p("|---|%s\n", sep(9))
		for _, sys := range r.Systems {
			var rows []StormResult
			for _, res := range r.W5 {
				if res.System == sys {
					rows = append(rows, res)
				}
			}
			if len(rows) == 0 {
				p("| %s | failed ||||||||\n", sys)
				continue
			}
			var granted, sp, cp []float64
			var last, p50, p99, setup []time.Duration
			errs, over := 0, 0
			for _, s := range rows {
				granted, sp, cp = append(granted, float64(s.Granted)), append(sp, float64(s.ServerPeak)), append(cp, float64(s.ClientPeak))
				last, p50, p99, setup = append(last, s.LastLag), append(p50, s.P50Lag), append(p99, s.P99Lag), append(setup, s.Setup)
				errs += s.Errors
				if s.Overran {
					over++
				}
			}
			p("| %s | %s of %s | %s | %s | %s | %s | %d of %d | %s | %s | %d |\n", sys, num(median(granted)), num(float64(c.W5N)), secs(medDur(last)), secs(medDur(p50)), secs(medDur(p99)),
				secs(medDur(setup)), over, len(rows), mb(int64(median(sp))), mb(int64(median(cp))), errs)
		}
		p("\n")
	}
	r.boundariesMarkdown(p, refs, ratioCols, sep)
	if len(r.Failover) > 0 {
		r.failoverMarkdown(p)
	}
	var firsts []string
	for _, res := range r.W1 {
		if res.FirstErr != "" {
			firsts = append(firsts, fmt.Sprintf("w1 %s clients=%d round %d: %s", res.System, res.Clients, res.Round, res.FirstErr))
		}
	}
	for _, res := range r.W2 {
		if res.FirstErr != "" {
			firsts = append(firsts, fmt.Sprintf("w2 %s clients=%d round %d: %s", res.System, res.Clients, res.Round, res.FirstErr))
		}
	}
	for _, res := range r.W3 {
		if res.FirstErr != "" {
			firsts = append(firsts, fmt.Sprintf("w3 %s round %d: %s", res.System, res.Round, res.FirstErr))
		}
	}
	for _, res := range r.W4 {
		if res.FirstErr != "" {
			firsts = append(firsts, fmt.Sprintf("w4 %s round %d: %s", res.System, res.Round, res.FirstErr))
		}
	}
	for _, res := range r.W5 {
		if res.FirstErr != "" {
			firsts = append(firsts, fmt.Sprintf("w5 %s round %d: %s", res.System, res.Round, res.FirstErr))
		}
	}
	for _, res := range r.W6 {
		if res.FirstErr != "" {
			firsts = append(firsts, fmt.Sprintf("w6 %s candidates=%d round %d: %s", res.System, res.Candidates, res.Round, res.FirstErr))
		}
	}
	for _, res := range r.W7 {
		if res.FirstErr != "" {
			firsts = append(firsts, fmt.Sprintf("w7 %s clients=%d round %d: %s", res.System, res.Clients, res.Round, res.FirstErr))
		}
	}
	if len(r.LeaderChanges) > 0 {
		p("Leader changes during the cluster runs (the run's clients were opened with the old leader first; the next run lists the new one first):\n\n")
		for _, m := range r.LeaderChanges {
			p("- %s\n", oneLine(m))
		}
		p("\n")
	}
	if len(firsts)+len(r.Failures) > 0 {
		p("Errors (the first of each run) and failed runs:\n\n")
		for _, f := range append(r.Failures, firsts...) {
			p("- %s\n", oneLine(f))
		}
		p("\n")
	}
	return b.String()
}

func contains(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

// WriteSection replaces the text between the markers in the file at path
// with section (adding the markers at the end when the file has none),
// keeping everything else.
func WriteSection(path, section string) error { return WriteNamedSection(path, "", section) }

// WriteNamedSection is WriteSection with the markers
// "<!-- bench:begin NAME -->" and "<!-- bench:end NAME -->" (name "" =
// the plain markers), so that one file can hold several runner sections.
func WriteNamedSection(path, name, section string) error {
	begin, end := BeginMarker, EndMarker
	if name != "" {
		begin = strings.TrimSuffix(BeginMarker, " -->") + " " + name + " -->"
		end = strings.TrimSuffix(EndMarker, " -->") + " " + name + " -->"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	block := begin + "\n" + strings.TrimRight(section, "\n") + "\n" + end
	i, j := strings.Index(s, begin), strings.Index(s, end)
	switch {
	case i >= 0 && j > i:
		s = s[:i] + block + s[j+len(end):]
	case i < 0 && j < 0:
		s = strings.TrimRight(s, "\n") + "\n\n" + block + "\n"
	default:
		return fmt.Errorf("%s: unmatched %s / %s", path, begin, end)
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

// Problems lists what makes a report unusable: a system with no result in
// a workload that ran, errors, failed runs. The smoke test asserts it is
// empty.
func (r *Report) Problems() []string {
	var out []string
	out = append(out, r.Failures...)
	c := r.Config
	for _, sys := range r.Systems {
		count := func(n int, what string, want int) {
			if n < want {
				out = append(out, fmt.Sprintf("%s: %s has %d results, want %d", sys, what, n, want))
			}
		}
		_, boundary := registry[sys].(BoundarySystem)
		var n6, n7 int
		for _, x := range r.W6 {
			if x.System == sys {
				n6++
				if x.Errors > 0 || x.Elections == 0 {
					out = append(out, fmt.Sprintf("w6 %s candidates=%d: %d elections, %d errors (%s)", sys, x.Candidates, x.Elections, x.Errors, x.FirstErr))
				}
			}
		}
		for _, x := range r.W7 {
			if x.System == sys {
				n7++
				if x.Errors > 0 || x.Orders == 0 {
					out = append(out, fmt.Sprintf("w7 %s clients=%d: %d orders, %d errors (%s)", sys, x.Clients, x.Orders, x.Errors, x.FirstErr))
				}
			}
		}
		if boundary && c.has("6") {
			count(n6, "w6", len(c.W6Candidates)*c.Rounds)
		}
		if boundary && c.has("7") {
			count(n7, "w7", len(c.W7Clients)*c.Rounds)
		}
		var n1, n2, n3, n4, n5 int
		for _, x := range r.W1 {
			if x.System == sys {
				n1++
				if x.Errors > 0 || x.Ops == 0 {
					out = append(out, fmt.Sprintf("w1 %s clients=%d: %d ops, %d errors (%s)", sys, x.Clients, x.Ops, x.Errors, x.FirstErr))
				}
			}
		}
		for _, x := range r.W2 {
			if x.System == sys {
				n2++
				if x.Errors > 0 || x.Ops == 0 {
					out = append(out, fmt.Sprintf("w2 %s clients=%d: %d ops, %d errors (%s)", sys, x.Clients, x.Ops, x.Errors, x.FirstErr))
				}
			}
		}
		for _, x := range r.W3 {
			if x.System == sys {
				n3++
				if x.Errors > 0 || x.Grants == 0 {
					out = append(out, fmt.Sprintf("w3 %s: %d grants, %d errors (%s)", sys, x.Grants, x.Errors, x.FirstErr))
				}
			}
		}
		for _, x := range r.W4 {
			if x.System == sys {
				n4++
				if x.Errors > 0 || x.Held != c.W4N {
					out = append(out, fmt.Sprintf("w4 %s: %d of %d held, %d errors (%s)", sys, x.Held, c.W4N, x.Errors, x.FirstErr))
				}
			}
		}
		for _, x := range r.W5 {
			if x.System == sys {
				n5++
				if x.Errors > 0 || x.Granted != c.W5N {
					out = append(out, fmt.Sprintf("w5 %s: %d of %d waiters granted, %d errors (%s)", sys, x.Granted, c.W5N, x.Errors, x.FirstErr))
				}
			}
		}
		nf := 0
		for _, x := range r.Failover {
			if x.System == sys {
				nf++
			}
		}
		count(nf, "failover", c.Failover)
		if c.has("1") {
			count(n1, "w1", len(c.W1Clients)*c.Rounds)
		}
		if c.has("2") {
			count(n2, "w2", len(c.W2Clients)*c.Rounds)
		}
		if c.has("3") {
			count(n3, "w3", c.Rounds)
		}
		if c.has("4") {
			count(n4, "w4", c.W4Rounds)
		}
		if c.has("5") {
			count(n5, "w5", c.W5Rounds)
		}
	}
	return out
}
