package sqlguard

import (
	"sync/atomic"
	"time"
)

// Retention defaults of op records.
const (
	DefaultRetention  = 24 * time.Hour // op records younger than this are kept
	DefaultPruneEvery = 1000           // Do prunes its resource once per this many calls
)

// Pruner counts calls to Do and says when one of them should prune.
// The zero value never prunes; use NewPruner.
type Pruner struct {
	every uint64
	calls atomic.Uint64
}

// NewPruner returns a Pruner that is due once every `every` calls (the
// first call included); every < 0 disables it, 0 means DefaultPruneEvery.
func NewPruner(every int) *Pruner {
	switch {
	case every < 0:
		return &Pruner{}
	case every == 0:
		every = DefaultPruneEvery
	}
	return &Pruner{every: uint64(every)}
}

// Due counts one call and reports whether it should prune. Safe for
// concurrent use.
func (p *Pruner) Due() bool {
	if p == nil || p.every == 0 {
		return false
	}
	return (p.calls.Add(1)-1)%p.every == 0
}
