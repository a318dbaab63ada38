package bench

import (
	"slices"
	"sort"
	"time"
)

// percentile returns the q-quantile (0..1) of sorted durations, nearest rank.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	i = min(max(i, 0), len(sorted)-1)
	return sorted[i]
}

func sortDurations(d []time.Duration) { slices.Sort(d) }

// median of xs (the mean of the middle two for an even count); NaN-free: 0
// for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
