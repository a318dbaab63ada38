package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence/state"
)

// Group entries: the proposer (group.go) writes the commands that queued
// while earlier groups were in flight as ONE raft log entry:
//
//	byte     groupMarker (0xC1)
//	varint   Now    (zigzag; the group's one stamp, doc.go "Expiry and G3")
//	uvarint  Slack  (ns)
//	uvarint  count  (>= 1)
//	count × (uvarint length, then a state command as Command.MarshalBinary
//	         wrote it with Now = 0 and Slack = 0)
//
// Every command of the group is applied, in order, with the group's Now and
// Slack. An entry whose first byte is not groupMarker is one command as
// Command.MarshalBinary wrote it (logs written before groups existed): the
// fsm applies both kinds, so old logs replay as they were applied.
//
// The encoding is canonical: the decoder refuses a count of 0, a command
// that carries its own Now or Slack, a varint longer than its shortest
// encoding, truncation and trailing bytes. An entry that does not decode
// changes nothing (the same on every replay, R1).
//
// groupMarker must never be a state command version: state's versions
// count up from 1 (1 and 2 exist), and state refuses unknown versions, so
// an older binary refuses a group entry rather than misread it.
const groupMarker = 0xC1

// errBadGroup is wrapped by every group decoding error.
var errBadGroup = errors.New("node: malformed group entry")

// isGroup reports whether entry data is a group entry.
func isGroup(b []byte) bool { return len(b) > 0 && b[0] == groupMarker }

// groupHeaderMax bounds the bytes before the first command.
const groupHeaderMax = 1 + 3*binary.MaxVarintLen64

// appendGroupHeader starts a group entry of count commands stamped now,
// slack in b.
func appendGroupHeader(b []byte, now int64, slack time.Duration, count int) []byte {
	b = append(b, groupMarker)
	b = binary.AppendVarint(b, now)
	b = binary.AppendUvarint(b, uint64(slack))
	return binary.AppendUvarint(b, uint64(count))
}

// appendGroupCommand appends one command (encoded with Now and Slack 0).
func appendGroupCommand(b, cmd []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(cmd)))
	return append(b, cmd...)
}

// decodeGroup decodes a group entry into its commands, each with the
// group's Now and Slack, appended to dst[:0] (the FSM reuses one buffer).
// It never panics on any input.
func decodeGroup(b []byte, dst []state.Command) ([]state.Command, error) {
	if !isGroup(b) {
		return nil, fmt.Errorf("%w: no group marker", errBadGroup)
	}
	p := b[1:]
	now, k := binary.Varint(p)
	if k <= 0 || k != uvarintLen(uint64(now)<<1^uint64(now>>63)) {
		return nil, fmt.Errorf("%w: now", errBadGroup)
	}
	p = p[k:]
	slack, k := binary.Uvarint(p)
	if k <= 0 || k != uvarintLen(slack) || slack > math.MaxInt64 {
		return nil, fmt.Errorf("%w: slack", errBadGroup)
	}
	p = p[k:]
	count, k := binary.Uvarint(p)
	if k <= 0 || k != uvarintLen(count) || count == 0 {
		return nil, fmt.Errorf("%w: count", errBadGroup)
	}
	p = p[k:]
	// Every command takes at least 2 bytes (length, version): a count
	// beyond that is a lie, and must not size an allocation.
	if count > uint64(len(p))/2 {
		return nil, fmt.Errorf("%w: count %d in %d bytes", errBadGroup, count, len(p))
	}
	cmds := slices.Grow(dst[:0], int(count))[:count]
	clear(cmds)
	for i := range cmds {
		n, k := binary.Uvarint(p)
		if k <= 0 || k != uvarintLen(n) || n > uint64(len(p)-k) {
			return nil, fmt.Errorf("%w: command %d truncated", errBadGroup, i)
		}
		p = p[k:]
		c := &cmds[i]
		if err := c.UnmarshalBinary(p[:n]); err != nil {
			return nil, fmt.Errorf("%w: command %d: %w", errBadGroup, i, err)
		}
		if c.Now != 0 || c.Slack != 0 {
			return nil, fmt.Errorf("%w: command %d carries its own stamp", errBadGroup, i)
		}
		c.Now, c.Slack = now, time.Duration(slack)
		p = p[n:]
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errBadGroup, len(p))
	}
	return cmds, nil
}

// uvarintLen is the length of the shortest encoding of v: a longer one
// (trailing 0x80 bytes) is refused, so every group has one encoding.
func uvarintLen(v uint64) int { return max(1, (bits.Len64(v)+6)/7) }

// decodeEntry decodes the commands of a command entry of either kind (one
// command, or a group).
func decodeEntry(b []byte) ([]state.Command, error) {
	if isGroup(b) {
		return decodeGroup(b, nil)
	}
	var c state.Command
	if err := c.UnmarshalBinary(b); err != nil {
		return nil, err
	}
	return []state.Command{c}, nil
}

// entryCommandCount is the number of commands log entry l holds (what a
// replay applies): a group's count, else 1 (one command, or an entry raft
// applies itself).
func entryCommandCount(l *raft.Log) uint64 {
	if l.Type != raft.LogCommand || !isGroup(l.Data) {
		return 1
	}
	p := l.Data[1:]
	for range 2 { // Now, Slack
		_, k := binary.Uvarint(p)
		if k <= 0 {
			return 1
		}
		p = p[k:]
	}
	if count, k := binary.Uvarint(p); k > 0 && count > 0 {
		return count
	}
	return 1
}
