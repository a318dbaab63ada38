package bench

import (
	"strings"
	"time"
)

// boundariesMarkdown writes the tables of workloads 6 and 7.
func (r *Report) boundariesMarkdown(p func(string, ...any), refs []string, ratioCols func() string, sep func(int) string) {
	c := r.Config
	var systems []string
	for _, s := range r.Systems {
		if _, ok := registry[s].(BoundarySystem); ok {
			systems = append(systems, s)
		}
	}
	ratios := func(byRound map[string]map[int]float64, sys string) {
		for _, ref := range refs {
			if ref == sys {
				p(" — |")
			} else {
				p(" %s |", ratio(byRound, ref, sys))
			}
		}
	}
	if len(r.W6) > 0 {
		p("### 6. Leader election: N candidates, each leader resigns at once\n\n")
		p("Every candidate loops Campaign → Resign on one election for %v per run, after each has led once in turn. ", c.W6Duration)
		p("Fence: `client.Election` (Campaign = a waiting Acquire of the election's lock, then the proclaim: a fenced write of the value with the new token; Resign = Release; fence-unary TTL 10 s with its keepalive, fence-session session-bound); ")
		p("etcd: `concurrency.Election` on a session per candidate (Campaign puts the candidate's key and waits for the older keys to go; Resign deletes it). ")
		p("elections/s = leaders in the window; hand-off = from the leader's Resign call to the next leader's Campaign returning (value proclaimed).\n\n")
		p("| candidates | system | elections/s | hand-off p50 ms | p99 ms | server CPU-s / 10k |%s errors |\n", ratioCols())
		p("|---:|---|%s\n", sep(4+len(refs)+1))
		for _, n := range c.W6Candidates {
			byRound := map[string]map[int]float64{}
			for _, res := range r.W6 {
				if res.Candidates == n {
					if byRound[res.System] == nil {
						byRound[res.System] = map[int]float64{}
					}
					byRound[res.System][res.Round] = res.PerSec
				}
			}
			for _, sys := range systems {
				var rate, cpu []float64
				var p50, p99 []time.Duration
				errs := 0
				for _, res := range r.W6 {
					if res.Candidates == n && res.System == sys {
						rate, cpu = append(rate, res.PerSec), append(cpu, res.CPUPer10k)
						p50, p99 = append(p50, res.P50), append(p99, res.P99)
						errs += res.Errors
					}
				}
				if len(rate) == 0 {
					p("| %d | %s | failed ||||%s |\n", n, sys, strings.Repeat(" |", len(refs)))
					continue
				}
				p("| %d | %s | %s%s | %s | %s | %.2f |", n, sys, num(median(rate)), rangeOf(rate), ms(medDur(p50)), ms(medDur(p99)), median(cpu))
				ratios(byRound, sys)
				p(" %d |\n", errs)
			}
		}
		p("\n")
	}
	if len(r.W7) > 0 {
		p("### 7. An order's 3 SKUs taken at once\n\n")
		p("Every client loops: pick 3 distinct SKUs of %d at random (clients overlap), take all 3 at once, release them; for %v per run after 3 warm-up orders. ", c.W7SKUs, c.W7Duration)
		p("Fence: one `AcquireSet` of the 3 with a wait (queued FIFO on every lock, granted whole) and one `Release` (fence-unary TTL 10 s, fence-session session-bound); ")
		p("etcd: one `Txn().If(CreateRevision(k)=0 for the 3).Then(Put the 3 with the session's lease)` — etcd has no queue for a set of keys, so a refused txn is tried again after %v–%v — and one txn deleting the 3. ", c.SetRetry, 2*c.SetRetry)
		p("Latency is an order's acquire, from its first try to holding all 3; tries/order = etcd's txns per order (Fence: 1).\n\n")
		p("| clients | system | orders/s | p50 ms | p99 ms | tries/order | server CPU-s / 10k |%s errors |\n", ratioCols())
		p("|---:|---|%s\n", sep(5+len(refs)+1))
		for _, n := range c.W7Clients {
			byRound := map[string]map[int]float64{}
			for _, res := range r.W7 {
				if res.Clients == n {
					if byRound[res.System] == nil {
						byRound[res.System] = map[int]float64{}
					}
					byRound[res.System][res.Round] = res.PerSec
				}
			}
			for _, sys := range systems {
				var rate, cpu, tries []float64
				var p50, p99 []time.Duration
				errs := 0
				for _, res := range r.W7 {
					if res.Clients == n && res.System == sys {
						rate, cpu, tries = append(rate, res.PerSec), append(cpu, res.CPUPer10k), append(tries, res.TriesPerOrder)
						p50, p99 = append(p50, res.P50), append(p99, res.P99)
						errs += res.Errors
					}
				}
				if len(rate) == 0 {
					p("| %d | %s | failed |||||%s |\n", n, sys, strings.Repeat(" |", len(refs)))
					continue
				}
				p("| %d | %s | %s%s | %s | %s | %.2f | %.2f |", n, sys, num(median(rate)), rangeOf(rate), ms(medDur(p50)), ms(medDur(p99)), median(tries), median(cpu))
				ratios(byRound, sys)
				p(" %d |\n", errs)
			}
		}
		p("\n")
	}
}
