package bench

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Soak targets (issue 24): judged at the end of a soak, never in a timed test.
const (
	soakMaxRestart   = 2 * time.Second
	soakMaxRSS       = 300e6 // bytes per node
	soakMaxRSSSlope  = 1.0   // MiB/min per node over the last half: "flat"
	soakMaxSnapRate  = 0.5e6 // bytes/s of snapshots written per node
	soakMaxP99Growth = 1.5   // last window's p99 ÷ the first's
	// soakRestartSettle: samples this long after a node's restart are left
	// out of its RSS slope (a fresh process's heap grows back to its
	// steady size first).
	soakRestartSettle = time.Minute
)

// soakChecks judges res against the targets.
func soakChecks(res *SoakResult) []SoakCheck {
	var out []SoakCheck
	add := func(name string, pass bool, format string, args ...any) {
		out = append(out, SoakCheck{Name: name, Pass: pass, Detail: fmt.Sprintf(format, args...)})
	}
	ex := ""
	if len(res.LostExample) > 0 {
		ex = "; e.g. " + strings.Join(res.LostExample, "; ")
	}
	add("0 acknowledged writes lost", res.Lost == 0 && res.Resources > 0,
		"%d lost over %d resources read back (%d cycles acknowledged, %d writes/adds never answered, allowed either way)%s",
		res.Lost, res.Resources, res.Cycles, res.Ambiguous, ex)

	worst, bad := time.Duration(0), 0
	var all []string
	for _, r := range res.Restarts {
		worst = max(worst, r.KillReady)
		if r.Err != "" || r.KillReady >= soakMaxRestart {
			bad++
		}
		all = append(all, ms(r.KillReady))
	}
	add("every restart under 2 s", bad == 0 && len(res.Restarts) > 0,
		"%d restarts, %d over 2 s or failed, worst %s ms (kill -9 → /readyz 200; ms: %s)", len(res.Restarts), bad, ms(worst), strings.Join(all, ", "))

	slopes, floors, peaks := res.RSSSlopes(), res.RSSFloorSlopes(), res.PeakRSS()
	flat, under := true, true
	var sl, pk []string
	for i := range slopes {
		flat = flat && slopes[i] <= soakMaxRSSSlope
		under = under && peaks[i] < soakMaxRSS
		sl = append(sl, fmt.Sprintf("%s %+.2f (floor %+.2f)", res.NodeIDs[i], slopes[i], floors[i]))
		var last []float64
		for _, x := range res.Samples {
			if x.At >= res.lastHalf() && i < len(x.Nodes) && x.Nodes[i].RSS >= 0 {
				last = append(last, float64(x.Nodes[i].RSS)/1e6)
			}
		}
		pk = append(pk, fmt.Sprintf("%s %.0f (median of the last half %.0f)", res.NodeIDs[i], float64(peaks[i])/1e6, median(last)))
	}
	full := "never full (the run was too short for the cap)"
	if at := res.IDsFullAt(); at >= 0 {
		full = "full at " + minutes(at)
	}
	add("RSS flat after the id memory is full", flat && len(slopes) > 0,
		"least-squares slope of every sample over the last half (from %s; id memory %s; %v after each restart left out), and of each minute's lowest sample (the floor between snapshot writes), MiB/min: %s (target ≤ %.1f)",
		minutes(res.lastHalf()), full, soakRestartSettle, strings.Join(sl, ", "), soakMaxRSSSlope)
	add("RSS under 300 MB per node", under && len(peaks) > 0, "peak RSS, MB: %s", strings.Join(pk, ", "))

	rates := res.SnapRates()
	okr := len(rates) > 0
	var rs []string
	for i, r := range rates {
		okr = okr && r < soakMaxSnapRate
		rs = append(rs, fmt.Sprintf("%s %.3f", res.NodeIDs[i], r/1e6))
	}
	add("snapshot writes under 0.5 MB/s", okr, "snapshot bytes written ÷ run time per node, MB/s: %s", strings.Join(rs, ", "))

	ratio := 0.0
	if res.FirstP99 > 0 {
		ratio = float64(res.LastP99) / float64(res.FirstP99)
	}
	add("last p99 within 1.5× of the first", res.FirstP99 > 0 && ratio <= soakMaxP99Growth,
		"cycle p99 of the first %v %s ms, of the last %v %s ms: %.2f×", res.Window, ms(res.FirstP99), res.Window, ms(res.LastP99), ratio)
	return out
}

func minutes(d time.Duration) string { return fmt.Sprintf("%.1f min", d.Minutes()) }

func (r *SoakResult) lastHalf() time.Duration {
	if len(r.Samples) == 0 {
		return 0
	}
	return r.Samples[len(r.Samples)-1].At / 2
}

// IDsFullAt is when the id memory became full: the first sample at which a
// node held 98% of its cap of op_ids (-1: never).
func (r *SoakResult) IDsFullAt() time.Duration {
	for _, s := range r.Samples {
		for _, n := range s.Nodes {
			if n.OpIDsMax > 0 && float64(n.OpIDs) >= 0.98*float64(n.OpIDsMax) {
				return s.At
			}
		}
	}
	return -1
}

// RSSSlopes is each node's RSS slope (MiB/min, least squares) over the
// last half of the samples, leaving out soakRestartSettle after each of its
// restarts.
func (r *SoakResult) RSSSlopes() []float64 {
	from := r.lastHalf()
	out := make([]float64, len(r.NodeIDs))
	for i, id := range r.NodeIDs {
		var xs, ys []float64
		for _, s := range r.Samples {
			if s.At < from || i >= len(s.Nodes) || s.Nodes[i].RSS < 0 || r.settling(id, s.At) {
				continue
			}
			xs, ys = append(xs, s.At.Minutes()), append(ys, mib(s.Nodes[i].RSS))
		}
		out[i] = slope(xs, ys)
	}
	return out
}

// RSSFloorSlopes is RSSSlopes of each minute's lowest sample: the RSS
// between snapshot writes, without their spikes.
func (r *SoakResult) RSSFloorSlopes() []float64 {
	from := r.lastHalf()
	out := make([]float64, len(r.NodeIDs))
	for i, id := range r.NodeIDs {
		floor := map[int64]float64{}
		for _, s := range r.Samples {
			if s.At < from || i >= len(s.Nodes) || s.Nodes[i].RSS < 0 || r.settling(id, s.At) {
				continue
			}
			m := int64(s.At / time.Minute)
			if v, ok := floor[m]; !ok || mib(s.Nodes[i].RSS) < v {
				floor[m] = mib(s.Nodes[i].RSS)
			}
		}
		var xs, ys []float64
		for m, v := range floor {
			xs, ys = append(xs, float64(m)+0.5), append(ys, v)
		}
		out[i] = slope(xs, ys)
	}
	return out
}

func (r *SoakResult) settling(node string, at time.Duration) bool {
	for _, x := range r.Restarts {
		if x.Node == node && at >= x.At && at < x.At+x.KillReady+soakRestartSettle {
			return true
		}
	}
	return false
}

func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx, sy, sxx, sxy = sx+xs[i], sy+ys[i], sxx+xs[i]*xs[i], sxy+xs[i]*ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// PeakRSS is each node's highest RSS sampled.
func (r *SoakResult) PeakRSS() []int64 {
	out := make([]int64, len(r.NodeIDs))
	for _, s := range r.Samples {
		for i, n := range s.Nodes {
			out[i] = max(out[i], n.RSS)
		}
	}
	return out
}

// SnapRates is each node's snapshot bytes written ÷ the run's time.
func (r *SoakResult) SnapRates() []float64 {
	if len(r.Samples) == 0 {
		return nil
	}
	last := r.Samples[len(r.Samples)-1]
	var out []float64
	for _, n := range last.Nodes {
		out = append(out, float64(n.SnapWritten)/last.At.Seconds())
	}
	return out
}

// writeSoakCSV writes the samples (one row per sample, the nodes' columns
// side by side) to path and the restarts to path with -restarts before
// its extension.
func writeSoakCSV(path string, res *SoakResult) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("t_s,cycles_per_s,p50_ms,p99_ms,failed_total,leader,load1")
	for i := range res.NodeIDs {
		n := i + 1
		fmt.Fprintf(&b, ",n%d_rss_mib,n%d_heap_inuse_mib,n%d_snapshot_bytes,n%d_snapshot_written_bytes,n%d_snapshot_write_bps,n%d_op_ids,n%d_request_ids,n%d_id_memory_bytes,n%d_data_dir_bytes,n%d_restarts", n, n, n, n, n, n, n, n, n, n)
	}
	b.WriteString("\n")
	for _, s := range res.Samples {
		fmt.Fprintf(&b, "%.0f,%.1f,%.3f,%.3f,%d,%s,%.2f", s.At.Seconds(), float64(s.Cycles)/s.Window.Seconds(),
			float64(s.P50)/1e6, float64(s.P99)/1e6, s.Failed, s.Leader, s.Load1)
		for _, n := range s.Nodes {
			fmt.Fprintf(&b, ",%.1f,%.1f,%d,%d,%.0f,%d,%d,%d,%d,%d", mib(n.RSS), mib(n.HeapInuse), n.SnapBytes, n.SnapWritten, n.SnapRate,
				n.OpIDs, n.RequestIDs, n.IDMemBytes, n.DataDirBytes, n.Restarts)
		}
		b.WriteString("\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return err
	}
	var rb strings.Builder
	rb.WriteString("at_s,node,kill_to_ready_ms,snapshot_restore_ms,snapshot_bytes,replay_ms,replayed_entries,error\n")
	for _, r := range res.Restarts {
		fmt.Fprintf(&rb, "%.1f,%s,%.1f,%.1f,%d,%.1f,%d,%q\n", r.At.Seconds(), r.Node, float64(r.KillReady)/1e6,
			float64(r.SnapshotRestore)/1e6, r.SnapshotBytes, float64(r.Replay)/1e6, r.Entries, r.Err)
	}
	ext := filepath.Ext(path)
	return os.WriteFile(strings.TrimSuffix(path, ext)+"-restarts"+ext, []byte(rb.String()), 0o644)
}

// soakSVG plots RSS and snapshot size per node and the cycle p50/p99 over
// time, one panel each, with the leader kills as dashed lines: plain SVG
// polylines, no dependency.
func soakSVG(res *SoakResult) string {
	const W, PH, L, R, T, gap = 960.0, 200.0, 70.0, 150.0, 40.0, 50.0
	colors := []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"}
	H := T + 3*PH + 3*gap
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", W, H, W, H)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="15">Fence soak: %d nodes, %.0f cycles/s target, leader killed every %v, %s (%s)</text>`+"\n",
		L, res.Config.Nodes, res.Config.Rate, res.Config.KillEvery, res.Finished.Sub(res.Started).Round(time.Second), res.Started.UTC().Format("2006-01-02 15:04 UTC"))
	var tmax float64
	if n := len(res.Samples); n > 0 {
		tmax = res.Samples[n-1].At.Minutes()
	}
	if tmax <= 0 {
		tmax = 1
	}
	pw := W - L - R
	type series struct {
		name  string
		color string
		ys    []float64 // NaN: no point
	}
	panel := func(k int, title, unit string, ss []series) {
		top := T + float64(k)*(PH+gap)
		ymax := 0.0
		for _, s := range ss {
			for _, y := range s.ys {
				if !math.IsNaN(y) {
					ymax = math.Max(ymax, y)
				}
			}
		}
		ymax = niceCeil(ymax)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-weight="bold">%s</text>`+"\n", L, top-8, title)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#888"/>`+"\n", L, top, pw, PH)
		for j := 0; j <= 4; j++ {
			y := top + PH - PH*float64(j)/4
			fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#eee"/>`+"\n", L, y, L+pw, y)
			fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n", L-6, y+4, trimFloat(ymax*float64(j)/4))
		}
		fmt.Fprintf(&b, `<text x="14" y="%.0f" transform="rotate(-90 14 %.0f)" text-anchor="middle">%s</text>`+"\n", top+PH/2, top+PH/2, unit)
		for j := 0; j <= 6; j++ {
			x := L + pw*float64(j)/6
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", x, top+PH+15, trimFloat(tmax*float64(j)/6))
		}
		for _, r := range res.Restarts {
			x := L + pw*r.At.Minutes()/tmax
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#aaa" stroke-dasharray="3,3"/>`+"\n", x, top, x, top+PH)
		}
		for si, s := range ss {
			var pts []string
			flush := func() {
				if len(pts) > 0 {
					fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", s.color, strings.Join(pts, " "))
				}
				pts = nil
			}
			for i, y := range s.ys {
				if math.IsNaN(y) {
					flush()
					continue
				}
				x := L + pw*res.Samples[i].At.Minutes()/tmax
				yy := top + PH - PH*y/ymax
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, yy))
			}
			flush()
			ly := top + 14 + float64(si)*16
			fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="%s" stroke-width="3"/><text x="%.0f" y="%.0f">%s</text>`+"\n",
				L+pw+10, ly-4, L+pw+30, ly-4, s.color, L+pw+36, ly, s.name)
		}
	}
	nodeSeries := func(f func(SoakNodeSample) float64) []series {
		var ss []series
		for i, id := range res.NodeIDs {
			s := series{name: id, color: colors[i%len(colors)]}
			for _, x := range res.Samples {
				v := math.NaN()
				if i < len(x.Nodes) {
					v = f(x.Nodes[i])
				}
				s.ys = append(s.ys, v)
			}
			ss = append(ss, s)
		}
		return ss
	}
	panel(0, "RSS per node", "MiB", nodeSeries(func(n SoakNodeSample) float64 {
		if n.RSS < 0 {
			return math.NaN()
		}
		return mib(n.RSS)
	}))
	panel(1, "Snapshot size per node (last written / newest on disk)", "MB", nodeSeries(func(n SoakNodeSample) float64 {
		if n.SnapBytes < 0 {
			return math.NaN()
		}
		return float64(n.SnapBytes) / 1e6
	}))
	p50, p99 := series{name: "p50", color: "#1f77b4"}, series{name: "p99", color: "#d62728"}
	for _, s := range res.Samples {
		nan := func(d time.Duration) float64 {
			if s.Cycles == 0 {
				return math.NaN()
			}
			return float64(d) / 1e6
		}
		p50.ys, p99.ys = append(p50.ys, nan(s.P50)), append(p99.ys, nan(s.P99))
	}
	panel(2, "Cycle latency per 10 s window (acquire → write → add → release)", "ms", []series{p99, p50})
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">minutes (dashed: leader killed with kill -9 and restarted)</text>`+"\n", L+pw/2, H-10)
	b.WriteString("</svg>\n")
	return b.String()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.1f", v)
	return strings.TrimSuffix(s, ".0")
}

// SoakMarkdown is the soak's section of docs/benchmarks.md: the command,
// the machine, the pass/fail lines, the restarts, and the plot.
func SoakMarkdown(res *SoakResult, env Env, command, svgRel, csvRel string) string {
	var b strings.Builder
	c := res.Config
	fmt.Fprintf(&b, "Run %s → %s (UTC), `%s`\n\n", res.Started.UTC().Format("2006-01-02 15:04"), res.Finished.UTC().Format("15:04"), command)
	fmt.Fprintf(&b, "Machine: %s CPUs (%s), Linux %s, %s; fence %s. %d nodes, each its own `fence serve` process on loopback; "+
		"%d workers over %d sessions paced at %.0f cycles/s; leader killed (kill -9) every %v and restarted at once with the same flags.\n\n",
		env.CPUs, env.CPUModel, env.Kernel, env.Go, env.FenceCommit, c.Nodes, c.Workers, c.Sessions, c.Rate, c.KillEvery)
	dur := res.Finished.Sub(res.Started)
	fmt.Fprintf(&b, "%d cycles completed (%.0f/s), %d failed (a step not answered within %v, or refused — during failovers).\n\n",
		res.Cycles, float64(res.Cycles)/dur.Seconds(), res.Failed, soakOpTimeout)
	var loads []float64
	for _, x := range res.Samples {
		if x.Load1 >= 0 {
			loads = append(loads, x.Load1)
		}
	}
	if len(loads) > 0 {
		lo, hi := loads[0], loads[0]
		for _, l := range loads {
			lo, hi = math.Min(lo, l), math.Max(hi, l)
		}
		fmt.Fprintf(&b, "The box's 1-minute load average over the run (the soak's own 3 nodes and clients, and whatever else ran): min %.1f, median %.1f, max %.1f on %s CPUs.\n\n",
			lo, median(loads), hi, env.CPUs)
	}
	b.WriteString("| target | result | measured |\n|---|---|---|\n")
	for _, k := range res.Checks {
		r := "**pass**"
		if !k.Pass {
			r = "**FAIL**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", k.Name, r, strings.ReplaceAll(k.Detail, "|", "/"))
	}
	b.WriteString("\n| restart at | node | kill → ready ms | snapshot restored ms (MB) | log replayed ms (entries) |\n|---|---|---|---|---|\n")
	for _, r := range res.Restarts {
		fmt.Fprintf(&b, "| %s | %s | %s | %s (%.1f) | %s (%d) |%s\n", minutes(r.At), r.Node, ms(r.KillReady), ms(r.SnapshotRestore),
			float64(r.SnapshotBytes)/1e6, ms(r.Replay), r.Entries, errSuffix(r.Err))
	}
	if n := len(res.Samples); n > 0 {
		last := res.Samples[n-1]
		b.WriteString("\n| node | RSS at end MiB | heap in use MiB | remembered op_ids | id memory MiB | last snapshot MB | snapshot MB written |\n|---|---|---|---|---|---|---|\n")
		for i, x := range last.Nodes {
			fmt.Fprintf(&b, "| %s | %.0f | %.0f | %d | %.1f | %.1f | %.0f |\n", res.NodeIDs[i], mib(x.RSS), mib(x.HeapInuse), x.OpIDs,
				mib(x.IDMemBytes), float64(x.SnapBytes)/1e6, float64(x.SnapWritten)/1e6)
		}
	}
	if svgRel != "" {
		fmt.Fprintf(&b, "\n![soak: RSS, snapshot size and cycle latency over time](%s)\n", svgRel)
	}
	if csvRel != "" {
		fmt.Fprintf(&b, "\nSamples every %v: `%s` (and its `-restarts` file).\n", c.SampleEvery, csvRel)
	}
	return b.String()
}
