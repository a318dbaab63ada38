package backup

import (
	"errors"
	"fmt"
	"time"

	"github.com/fenceworks/fence"
)

// WallFloorPerMS is the wall-clock floor's tokens per millisecond: the
// wall floor is unix_ms(now) × 1024 (docs/design.md §3).
const WallFloorPerMS = 1024

// Floor sources Plan adds itself; SourceFlag is the one an operator's
// --floor N uses (it alone lets a restore run with a clock behind the
// backup's).
const (
	SourceBackup = "backup"     // the backup's counter (last token issued)
	SourceWall   = "wall-clock" // unix_ms(now) × 1024
	SourceFlag   = "--floor"
)

// Floor is a token known to have been issued (or accepted by a guard)
// before the restore: the first token after it must be above it. Source
// names where it came from: SourceFlag, a guard store's DSN (without its
// password), SourceBackup, SourceWall.
type Floor struct {
	Source string      `json:"source"`
	Token  fence.Token `json:"token"`
}

// MaxFirstToken is the largest first token a restore gives: 2^53 − 2^40,
// leaving 2^40 tokens (about 12 days of the wall floor's 1024 per
// millisecond, or a trillion grants) below the largest token Fence issues
// (fence.MaxTokenJSONInt, 2^53 − 1). A floor that puts the first token
// above it is a mistyped --floor or a corrupt guard store far more likely
// than a real one, and a node restored there would soon refuse every grant
// (and its backups its own verifier).
const MaxFirstToken fence.Token = 1<<53 - 1<<40

// ErrClockBehind: the restoring clock reads earlier than the backup's
// wall-clock time and no --floor was given (the wall floor could then be
// below tokens issued since).
var ErrClockBehind = errors.New("backup: the clock is behind the backup's recorded time")

// WallFloor is the wall-clock floor at now: unix_ms(now) × 1024 (0 for a
// time before 1970).
func WallFloor(now time.Time) fence.Token {
	ms := now.UnixMilli()
	if ms <= 0 {
		return 0
	}
	return fence.Token(ms) * WallFloorPerMS
}

// Plan decides what Restore would do with a backup whose header is h:
// the floors considered (the backup's counter, opts.Floors, the wall
// floor at opts.Now), and the first token the restored node will issue,
//
//	First = 1 + max(h.LastToken, every floor, unix_ms(opts.Now) × 1024).
//
// It refuses (ErrClockBehind) opts.Now earlier than h.WallUnixMS unless a
// floor with Source SourceFlag is given, and a floor or first token above
// the largest token (fence.MaxTokenJSONInt), and a first token above
// MaxFirstToken (2^53 − 2^40: headroom). It writes nothing.
func Plan(h Header, opts RestoreOptions) (Report, error) {
	rep := Report{Header: h, Old: h.LastToken}
	if opts.Now.IsZero() {
		return rep, fence.Invalid("now", "a wall-clock time", "zero")
	}
	flag := false
	for _, f := range opts.Floors {
		if f.Token > fence.MaxTokenJSONInt {
			return rep, fence.Invalid("floor "+f.Source, fmt.Sprintf("at most %d", uint64(fence.MaxTokenJSONInt)), f.Token.String())
		}
		flag = flag || f.Source == SourceFlag
	}
	nowMS := opts.Now.UnixMilli()
	if nowMS < h.WallUnixMS && !flag {
		return rep, fmt.Errorf("%w: this clock reads %s (unix ms %d), the backup was taken at %s (unix ms %d), %s earlier: "+
			"the wall-clock floor could be below tokens issued since; fix the clock, or give --floor N with N at least the largest token issued",
			ErrClockBehind, opts.Now.UTC().Format(time.RFC3339Nano), nowMS, time.UnixMilli(h.WallUnixMS).UTC().Format(time.RFC3339Nano), h.WallUnixMS,
			time.Duration(h.WallUnixMS-nowMS)*time.Millisecond)
	}
	w := WallFloor(opts.Now)
	rep.Floors = append(rep.Floors, Floor{Source: SourceBackup, Token: h.LastToken})
	rep.Floors = append(rep.Floors, opts.Floors...)
	rep.Floors = append(rep.Floors, Floor{Source: SourceWall, Token: w})
	top := fence.Token(0)
	for _, f := range rep.Floors {
		top = max(top, f.Token)
	}
	if top >= MaxFirstToken {
		return rep, fence.Invalid("first token", fmt.Sprintf("at most %d (2^53 − 2^40: 2^40 tokens of headroom below the largest token %d); the largest floor is %s",
			uint64(MaxFirstToken), uint64(fence.MaxTokenJSONInt), largestFloor(rep.Floors)), (top + 1).String())
	}
	rep.First = top + 1
	// A floor given above the wall floor moves the counter ahead of the
	// wall clock: from now on the wall floor alone does not cover the
	// tokens this cluster issues, so a later restore of an older backup
	// (older than the tokens this one will issue) needs a --floor.
	given, from := fence.Token(0), ""
	for _, f := range opts.Floors {
		if f.Token > given {
			given, from = f.Token, f.Source
		}
	}
	if w <= h.LastToken {
		msg := fmt.Sprintf("the wall-clock floor %d is not above the backup's counter %d: "+
			"this clock is behind the one that restored last, an earlier restore was given a --floor above its wall floor, "+
			"or more than %d tokens were issued per millisecond on average; "+
			"the first token is above every floor given, but the wall clock vouches for nothing", w, h.LastToken, WallFloorPerMS)
		if h.LastToken > w && given < top {
			msg += fmt.Sprintf("; tokens run ahead of the wall clock by %s: a later restore of an older backup must be given a --floor "+
				"at least the largest token this cluster issues (fence status lastToken)", aheadOf(top-w))
		}
		rep.Warnings = append(rep.Warnings, msg)
	}
	if given == top && given > w {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("the first token comes from %s %d, above the wall-clock floor %d: "+
			"tokens now run ahead of the wall clock by %s; a later restore of an older backup must be given a --floor at least "+
			"the largest token this cluster issues (fence status lastToken): with the wall clock alone it would issue tokens "+
			"below ones already issued", from, given, w, aheadOf(given-w)))
	}
	if nowMS < h.WallUnixMS {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("this clock (unix ms %d) is behind the backup's recorded time (unix ms %d): going on because --floor was given; "+
			"session ids restart above the same floor (%d), which bounds tokens, not session ids: if more sessions than tokens were opened since the backup, "+
			"a session id issued since could be issued again — have clients open new sessions", nowMS, h.WallUnixMS, top))
	}
	return rep, nil
}

// largestFloor names the largest of floors: "N (source)".
func largestFloor(floors []Floor) string {
	var top Floor
	for _, f := range floors {
		if f.Token > top.Token || top.Source == "" {
			top = f
		}
	}
	return fmt.Sprintf("%d (%s)", uint64(top.Token), top.Source)
}

// aheadOf is the wall-clock time d tokens of wall floor stand for (d / 1024
// ms), as text: "3m20s", or with days beyond two.
func aheadOf(d fence.Token) string {
	t := time.Duration(float64(d) / WallFloorPerMS * float64(time.Millisecond))
	if t >= time.Second {
		t = t.Round(time.Second)
	} else {
		t = t.Round(time.Microsecond)
	}
	if t >= 48*time.Hour {
		return fmt.Sprintf("%s (%.1f days)", t, t.Hours()/24)
	}
	return t.String()
}
