package state

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"math"
	"strconv"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state/internal/plant"
)

// resource is a fenced value: it accepts a write only with a token at least
// the last one it accepted (G4).
type resource struct {
	name      string // the map key; op_id keys share its bytes
	value     []byte
	lastToken fence.Token
	version   uint64 // accepted writes, adds and deletes
	deleted   bool   // deleted and not written since: a tombstone keeping lastToken
}

// opKey names an op_id within its resource: the first 128 bits of the
// SHA-256 of (resource, op_id) (opKeyOf). The memory keeps this, not the
// names: 16 bytes whatever their length. Two (resource, op_id) pairs with
// the same key would answer one with the other's saved result (or a
// conflict); by chance that takes about 2^64 ids in one memory (a
// million held: a chance of 10^-27), and on purpose a collision search of
// 2^64 SHA-256 computations over ids the searcher chooses, both its own —
// the key of another principal's op_id is not one it can aim at (a second
// preimage: 2^128), and a retry by another principal is refused anyway
// (rec.owner). docs/design.md (The id memory).
type opKey [16]byte

// opKeyOf is the key of op_id id of resource name.
func opKeyOf(name, id string) opKey {
	h := sha256.New()
	var b [binary.MaxVarintLen64]byte
	h.Write([]byte(opKeyDomain))
	h.Write(b[:binary.PutUvarint(b[:], uint64(len(name)))])
	h.Write([]byte(name))
	h.Write([]byte(id))
	var k opKey
	copy(k[:], h.Sum(nil))
	return k
}

// opKeyDomain sets the keys of op_ids apart from every other hash.
const opKeyDomain = "fence op_id key\x00"

// opRecord is the compact saved result of an accepted write, add or
// delete: 32 bytes. A hash of the payload (a write's value is the
// request's own, so it is not kept; the token is in the payload, so a
// replay has the record's token), the principal's number in the memory,
// and the facts to rebuild the reply.
type opRecord struct {
	payload  [payloadSize]byte
	owner    uint32 // the principal that made it (its memory's number; 0 none)
	version  uint64
	addValue int64 // Add: the value after it
}

func (r opRecord) by() uint32 { return r.owner }

func (r opRecord) ownedBy(id uint32) opRecord { r.owner = id; return r }

// payloadSize is how much of the SHA-256 of a payload an op_id record
// keeps: 96 bits tell payloads apart (a different payload under the same
// op_id is taken for a retry by chance once in 2^96, and on purpose
// only by its own principal after 2^96 tries), at 12 bytes so that a
// record is 32.
const payloadSize = 12

// payloadHash identifies (op, token, value or delta) of a write, add or
// delete.
func payloadHash(c Command) [payloadSize]byte {
	h := sha256.New()
	var b [1 + 2*binary.MaxVarintLen64]byte
	n := copy(b[:], []byte{byte(c.Op)})
	n += binary.PutUvarint(b[n:], uint64(c.Token))
	if c.Op == OpAdd {
		n += binary.PutVarint(b[n:], c.Delta)
	}
	h.Write(b[:n])
	if c.Op == OpWrite {
		h.Write(c.Value)
	}
	var sum [payloadSize]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// write replaces a resource's value if cmd.Token is not stale.
func (m *impl) write(cmd Command) Result {
	if err := m.validateWrite(cmd); err != nil {
		return Result{Err: err}
	}
	if res, done := m.replayOp(cmd); done {
		return res
	}
	r, err := m.fenced(cmd.Name, cmd.Token)
	if err == nil {
		err = m.admitChange(cmd, r, len(cmd.Value))
	}
	if err != nil {
		return Result{Err: err}
	}
	r = m.resourceFor(cmd.Name, r)
	m.setValue(r, bytes.Clone(cmd.Value))
	r.deleted = false
	return m.accepted(cmd, r, 0)
}

// add adds cmd.Delta to a resource holding a decimal integer (missing,
// deleted or empty = 0) if cmd.Token is not stale.
func (m *impl) add(cmd Command) Result {
	if err := m.validateAdd(cmd); err != nil {
		return Result{Err: err}
	}
	if res, done := m.replayOp(cmd); done {
		return res
	}
	r, err := m.fenced(cmd.Name, cmd.Token)
	if err != nil {
		return Result{Err: err}
	}
	var cur int64
	if r != nil && len(r.value) > 0 {
		cur, err = strconv.ParseInt(string(r.value), 10, 64)
		if err != nil {
			return Result{Err: fence.Invalid("value", "a decimal integer to add to", shorten(r.value))}
		}
	}
	if (cmd.Delta > 0 && cur > math.MaxInt64-cmd.Delta) || (cmd.Delta < 0 && cur < math.MinInt64-cmd.Delta) {
		return Result{Err: fence.Invalid("delta", "such that the sum fits in int64", itoa(cmd.Delta))}
	}
	sum := cur + cmd.Delta
	v := strconv.AppendInt(nil, sum, 10)
	if err := m.admitChange(cmd, r, len(v)); err != nil {
		return Result{Err: err}
	}
	r = m.resourceFor(cmd.Name, r)
	m.setValue(r, v)
	r.deleted = false
	return m.accepted(cmd, r, sum)
}

// admitChange checks the caps a change of r to size bytes could pass: the
// resource caps, and room to remember cmd's op_id.
func (m *impl) admitChange(cmd Command, r *resource, size int) error {
	var op error
	if cmd.OpID != "" {
		op = m.admitOp(cmd.Principal)
	}
	return first(m.admitResource(cmd.Name, r, size), op)
}

// replayOp returns the saved result of cmd's op_id, or a conflict. It comes
// before the token check: an applied op stays applied.
func (m *impl) replayOp(cmd Command) (Result, bool) {
	if cmd.OpID == "" {
		return Result{}, false
	}
	rec, ok := m.ops.get(opKeyOf(cmd.Name, cmd.OpID))
	if !ok {
		return Result{}, false
	}
	// Only its principal's retry is answered (an op remembered before
	// records carried one has none: anyone's retry is, as it was then).
	if rec.owner != 0 {
		if err := owns(cmd, m.ops.principal(rec.owner), "op_id", cmd.OpID); err != nil {
			return Result{Err: err}, true
		}
	}
	if rec.payload != payloadHash(cmd) {
		return Result{Err: &fence.OpConflictError{Field: "op_id", ID: cmd.OpID}}, true
	}
	st := &ResourceState{Resource: cmd.Name, LastToken: cmd.Token, Version: rec.version} // the token is in the payload
	res := Result{Resource: st, Replayed: true}
	switch cmd.Op {
	case OpAdd:
		st.Value = strconv.AppendInt(nil, rec.addValue, 10)
		res.AddValue = rec.addValue
	case OpDelete:
		st.Deleted = true
	default:
		st.Value = bytes.Clone(cmd.Value)
	}
	return res, true
}

// fenced returns resource name (nil if it does not exist) if token may
// change it: issued, and not older than the last token it accepted.
func (m *impl) fenced(name string, token fence.Token) (*resource, error) {
	if token > m.counter {
		return nil, &fence.UnknownTokenError{Token: token, LastIssued: m.counter}
	}
	r := m.resources[name]
	if plant.On(plant.SkipCompare) {
		return r, nil // the planted fault skip-compare (plant.go)
	}
	if r != nil && token < r.lastToken {
		m.noteRefused(name, token, r.lastToken)
		return nil, &fence.StaleTokenError{Resource: name, Token: token, LastAccepted: r.lastToken}
	}
	return r, nil
}

// resourceFor returns r, or a new resource name when r is nil (only once
// the change is accepted).
func (m *impl) resourceFor(name string, r *resource) *resource {
	if r == nil {
		r = &resource{name: name}
		m.resources[name] = r
	}
	return r
}

// accepted records the token and version of an applied op and remembers its
// op_id.
func (m *impl) accepted(cmd Command, r *resource, addValue int64) Result {
	r.lastToken = cmd.Token
	r.version++
	m.noteWritten(cmd, r)
	if cmd.OpID != "" {
		m.ops.put(opKeyOf(r.name, cmd.OpID), opRecord{payload: payloadHash(cmd), version: r.version, addValue: addValue}, m.clock, cmd.Principal)
		m.rememberedBy(cmd.Principal)
	}
	res := Result{Resource: r.state()}
	if cmd.Op == OpAdd {
		res.AddValue = addValue
	}
	return res
}

func (m *impl) resource(name string) ResourceState {
	r := m.resources[name]
	if r == nil {
		return ResourceState{Resource: name}
	}
	return *r.state()
}

func (r *resource) state() *ResourceState {
	return &ResourceState{Resource: r.name, Value: bytes.Clone(r.value), LastToken: r.lastToken, Version: r.version, Deleted: r.deleted}
}

// del deletes a fenced resource if cmd.Token is not stale: its value and
// its bytes go, its last token and version stay (a tombstone, counted in
// MaxResources), so a stale writer is refused after the delete as before
// it. A resource never written gets a tombstone too.
func (m *impl) del(cmd Command) Result {
	if err := m.validateDelete(cmd); err != nil {
		return Result{Err: err}
	}
	if res, done := m.replayOp(cmd); done {
		return res
	}
	r, err := m.fenced(cmd.Name, cmd.Token)
	if err == nil {
		err = m.admitChange(cmd, r, 0)
	}
	if err != nil {
		return Result{Err: err}
	}
	r = m.resourceFor(cmd.Name, r)
	m.setValue(r, nil)
	r.deleted = true
	return m.accepted(cmd, r, 0)
}

// shorten renders a value for an error message.
func shorten(v []byte) string {
	const n = 32
	if len(v) > n {
		return strconv.Quote(string(v[:n])) + "..."
	}
	return strconv.Quote(string(v))
}
