package state

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state/internal/statepb"
)

// Command encoding for the replicated log, version 1: one byte,
// CommandVersion, then the command as a statepb.Command
// (internal/statepb/state.proto), every field present exactly when it is
// not zero.
//
// A command has exactly one encoding: the decoder re-encodes what it
// decoded and refuses input that differs (a present zero field, a repeated
// or out-of-order field, a non-minimal varint, a value out of its Go
// field's range), and refuses fields this binary does not know,
// truncation, commands larger than MaxCommandBytes, and any version but
// CommandVersion: a binary refuses (rather than misreads) a command
// written by a later format it cannot apply. testdata/commands.golden pins
// the bytes.

// CommandVersion is the first byte of every encoded command.
const CommandVersion = 1

// MaxCommandBytes bounds an encoded command: a maximal value plus room for
// every other field.
const MaxCommandBytes = fence.MaxValueBytes + 64<<10

// ErrBadCommand is matched (errors.Is) by every error refusing a command,
// to encode or to decode.
var ErrBadCommand = errors.New("state: malformed command")

// DecodeError refuses bytes that are not exactly what MarshalBinary or
// Snapshot writes (R2: nothing of them is applied). errors.Is matches it
// to ErrBadCommand (a command's) or ErrBadSnapshot (a snapshot's).
type DecodeError struct {
	Snapshot bool   // a snapshot's; otherwise a command's
	Message  int    // in a snapshot: 0 the header, n > 0 the n-th record after it
	Reason   string // what is wrong, e.g. "unknown field in Config"
}

func (e *DecodeError) Error() string {
	switch {
	case !e.Snapshot:
		return ErrBadCommand.Error() + ": " + e.Reason
	case e.Message == 0:
		return ErrBadSnapshot.Error() + ": header: " + e.Reason
	}
	return fmt.Sprintf("%s: record %d: %s", ErrBadSnapshot, e.Message, e.Reason)
}

// Is matches ErrBadSnapshot for a snapshot's, ErrBadCommand for a
// command's.
func (e *DecodeError) Is(target error) bool {
	return target == ErrBadSnapshot && e.Snapshot || target == ErrBadCommand && !e.Snapshot
}

// badCommand is a command's DecodeError.
func badCommand(format string, args ...any) error {
	return &DecodeError{Reason: fmt.Sprintf(format, args...)}
}

// deterministic is the one encoding of every message of the formats.
var deterministic = proto.MarshalOptions{Deterministic: true}

// bs is s as bytes, nil when empty (an absent field).
func bs(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// pbConfig is c as a message, nil when every field is 0 (absent).
func pbConfig(c Config) *statepb.Config {
	if c == (Config{}) {
		return nil
	}
	return configPB(c)
}

func configPB(c Config) *statepb.Config {
	return &statepb.Config{MaxTtl: int64(c.MaxTTL), MaxOps: int64(c.MaxOps), MaxRequests: int64(c.MaxRequests),
		IdRetention: int64(c.IDRetention), MinIdRetention: int64(c.MinIDRetention), MaxWaitersPerLock: int64(c.MaxWaitersPerLock),
		MaxWaiters: int64(c.MaxWaiters), MaxResources: int64(c.MaxResources), MaxResourceBytes: c.MaxResourceBytes,
		MaxLocks: int64(c.MaxLocks), MaxSessions: int64(c.MaxSessions), MaxSessionResults: int64(c.MaxSessionResults),
		MaxLockDelay: int64(c.MaxLockDelay), MaxSessionsPerPrincipal: int64(c.MaxSessionsPerPrincipal), MaxWaitersPerPrincipal: int64(c.MaxWaitersPerPrincipal),
		MaxIdsPerPrincipal: int64(c.MaxIDsPerPrincipal), MaxLocksPerPrincipal: int64(c.MaxLocksPerPrincipal)}
}

// configOfPB is the inverse of pbConfig; an int field out of int's range
// on this platform is refused.
func configOfPB(p *statepb.Config) (Config, error) {
	if p == nil {
		return Config{}, nil
	}
	c := Config{MaxTTL: time.Duration(p.MaxTtl), MaxOps: int(p.MaxOps), MaxRequests: int(p.MaxRequests),
		IDRetention: time.Duration(p.IdRetention), MinIDRetention: time.Duration(p.MinIdRetention),
		MaxWaitersPerLock: int(p.MaxWaitersPerLock), MaxWaiters: int(p.MaxWaiters), MaxResources: int(p.MaxResources),
		MaxResourceBytes: p.MaxResourceBytes, MaxLocks: int(p.MaxLocks), MaxSessions: int(p.MaxSessions), MaxSessionResults: int(p.MaxSessionResults),
		MaxLockDelay: time.Duration(p.MaxLockDelay), MaxSessionsPerPrincipal: int(p.MaxSessionsPerPrincipal), MaxWaitersPerPrincipal: int(p.MaxWaitersPerPrincipal),
		MaxIDsPerPrincipal: int(p.MaxIdsPerPrincipal), MaxLocksPerPrincipal: int(p.MaxLocksPerPrincipal)}
	if !proto.Equal(configPB(c), p) {
		return Config{}, fmt.Errorf("config field out of range")
	}
	return c, nil
}

// quotaPB is q as a message, nil when every field is 0 (absent).
func quotaPB(q Quota) *statepb.Quota {
	if q == (Quota{}) {
		return nil
	}
	return &statepb.Quota{Sessions: int64(q.Sessions), Waiters: int64(q.Waiters), Ids: int64(q.IDs), Conns: int64(q.Conns), Streams: int64(q.Streams), Locks: int64(q.Locks)}
}

// quotaOfPB is the inverse of quotaPB; a field out of int's range, or a
// present message with every field 0, is refused.
func quotaOfPB(p *statepb.Quota) (Quota, error) {
	if p == nil {
		return Quota{}, nil
	}
	q := Quota{Sessions: int(p.Sessions), Waiters: int(p.Waiters), IDs: int(p.Ids), Conns: int(p.Conns), Streams: int(p.Streams), Locks: int(p.Locks)}
	if !proto.Equal(quotaPB(q), p) {
		return Quota{}, fmt.Errorf("quota field out of range")
	}
	return q, nil
}

func encodeCommand(c Command) ([]byte, error) {
	return appendEncodedCommand(make([]byte, 0, 64+len(c.Name)+len(c.Owner)+len(c.RequestID)+len(c.OpID)+len(c.Value)), c)
}

// appendEncodedCommand appends c's encoding (version byte first) to b; on
// an error b is returned as it was.
func appendEncodedCommand(b []byte, c Command) ([]byte, error) {
	if c.Slack < 0 {
		return b, fmt.Errorf("%w: negative slack %s", ErrBadCommand, c.Slack)
	}
	start := len(b)
	out := appendCommand(append(b, CommandVersion), c)
	if len(out)-start > MaxCommandBytes {
		return b, fmt.Errorf("%w: %d bytes, more than %d", ErrBadCommand, len(out)-start, MaxCommandBytes)
	}
	return out, nil
}

// sized marshals deterministically with the size Size just computed.
var sized = proto.MarshalOptions{Deterministic: true, UseCachedSize: true}

func decodeCommand(out *Command, b []byte) error {
	if len(b) > MaxCommandBytes {
		return badCommand("%d bytes, more than %d", len(b), MaxCommandBytes)
	}
	if len(b) == 0 {
		return badCommand("empty")
	}
	if b[0] != CommandVersion {
		return badCommand("unknown version %d", b[0])
	}
	var c Command
	if err := readCommand(b[1:], &c); err != nil {
		return badCommand("%v", err)
	}
	// A command has one encoding: what appendCommand writes of what was
	// read (a present zero field, a repeated or out-of-order one, a
	// non-minimal varint, an empty config present all read back otherwise).
	buf := canonicalBufs.Get().(*[]byte)
	defer canonicalBufs.Put(buf)
	again := appendCommand((*buf)[:0], c)
	if cap(again) <= 64<<10 {
		*buf = again
	}
	if !bytes.Equal(again, b[1:]) {
		return badCommand("not in canonical encoding (%d bytes, canonical %d)", len(b)-1, len(again))
	}
	*out = c
	return nil
}

// knownFields refuses a message holding a field this binary does not know
// (written by a later format), at any depth.
func knownFields(m proto.Message) error {
	var err error
	var walk func(m protoreflect.Message)
	walk = func(m protoreflect.Message) {
		if err == nil && len(m.GetUnknown()) != 0 {
			err = fmt.Errorf("unknown field in %s", m.Descriptor().Name())
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.Message() == nil:
			case fd.IsList():
				for i := range v.List().Len() {
					walk(v.List().Get(i).Message())
				}
			default:
				walk(v.Message())
			}
			return err == nil
		})
	}
	walk(m.ProtoReflect())
	return err
}

// canonical refuses b unless it is the one encoding of m, the message
// decoded from b (or rebuilt from what was): so equal values are equal bytes,
// and a present zero field (or an empty message), a repeated field, fields
// out of order, a non-minimal varint or a value truncated to its field's
// type do not decode.
func canonical(b []byte, m proto.Message) error {
	buf := canonicalBufs.Get().(*[]byte)
	defer canonicalBufs.Put(buf)
	again, err := deterministic.MarshalAppend((*buf)[:0], m)
	if err != nil {
		return err
	}
	if cap(again) <= 64<<10 {
		*buf = again
	}
	if !bytes.Equal(again, b) {
		return fmt.Errorf("not in canonical encoding (%d bytes, canonical %d)", len(b), len(again))
	}
	return nil
}

// canonicalBufs holds the buffers canonical re-encodes into.
var canonicalBufs = sync.Pool{New: func() any { return new([]byte) }}
