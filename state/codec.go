package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/fenceworks/fence"
)

// Command encoding for the replicated log, version 1:
//
//	byte     version (CommandVersion)
//	byte     op
//	uvarint  mask: which fields follow (bit i = field i below)
//	fields, in this order, only those in mask:
//	  0 Now        zigzag varint
//	  1 Name       uvarint length + bytes
//	  2 Owner      uvarint length + bytes
//	  3 TTL        zigzag varint (ns)
//	  4 Wait       zigzag varint (ns)
//	  5 LockDelay  zigzag varint (ns)
//	  6 RequestID  uvarint length + bytes
//	  7 Token      uvarint
//	  8 Value      uvarint length + bytes
//	  9 Delta      zigzag varint
//	 10 OpID       uvarint length + bytes
//	 11 Slack      uvarint (ns; a negative Slack does not encode)
//	 12 Attempt    uvarint
//	 13 Config     uvarint config mask, then
//	               its present fields in this order, each a zigzag varint:
//	               0 MaxTTL (ns), 1 MaxOps, 2 MaxRequests, 3 IDRetention
//	               (ns), 4 MinIDRetention (ns), 5 MaxWaitersPerLock,
//	               6 MaxWaiters, 7 MaxResources, 8 MaxResourceBytes,
//	               9 MaxLocks, 10 MaxSessions, 11 MaxSessionResults
//	 14 Session    uvarint
//	 15 Seq        uvarint
//	 16 Ack        uvarint
//	 17 ClusterID  uvarint length + bytes
//
// A field is present exactly when it is not zero (an empty Value is absent),
// so every command has one encoding; the decoder refuses a present zero
// field, unknown mask bits (a command or config field this binary does not
// know), truncation, trailing bytes, commands larger than MaxCommandBytes,
// and any version but CommandVersion: a binary refuses (rather than
// misreads) a command written by a later format it cannot apply.
// testdata/commands.golden pins the bytes.

// CommandVersion is the first byte of every encoded command.
const CommandVersion = 1

// MaxCommandBytes bounds an encoded command: a maximal value plus room for
// every other field.
const MaxCommandBytes = fence.MaxValueBytes + 64<<10

const (
	fNow = iota
	fName
	fOwner
	fTTL
	fWait
	fLockDelay
	fRequestID
	fToken
	fValue
	fDelta
	fOpID
	fSlack
	fAttempt
	fConfig
	fSession
	fSeq
	fAck
	fClusterID
	fieldCount
)

// Config fields, in encoding order.
const (
	cMaxTTL = iota
	cMaxOps
	cMaxRequests
	cIDRetention
	cMinIDRetention
	cMaxWaitersPerLock
	cMaxWaiters
	cMaxResources
	cMaxResourceBytes
	cMaxLocks
	cMaxSessions
	cMaxSessionResults
	configFieldCount
)

// configInts lists c's fields as int64s in encoding order.
func configInts(c Config) [configFieldCount]int64 {
	return [configFieldCount]int64{int64(c.MaxTTL), int64(c.MaxOps), int64(c.MaxRequests), int64(c.IDRetention),
		int64(c.MinIDRetention), int64(c.MaxWaitersPerLock), int64(c.MaxWaiters), int64(c.MaxResources), c.MaxResourceBytes, int64(c.MaxLocks),
		int64(c.MaxSessions), int64(c.MaxSessionResults)}
}

// configOf is the inverse of configInts.
func configOf(v [configFieldCount]int64) Config {
	return Config{MaxTTL: time.Duration(v[0]), MaxOps: int(v[1]), MaxRequests: int(v[2]), IDRetention: time.Duration(v[3]),
		MinIDRetention: time.Duration(v[4]), MaxWaitersPerLock: int(v[5]), MaxWaiters: int(v[6]), MaxResources: int(v[7]), MaxResourceBytes: v[8], MaxLocks: int(v[9]),
		MaxSessions: int(v[10]), MaxSessionResults: int(v[11])}
}

// ErrBadCommand is wrapped by every decoding error.
var ErrBadCommand = errors.New("state: malformed command")

func encodeCommand(c Command) ([]byte, error) {
	var mask uint64
	set := func(i int, present bool) {
		if present {
			mask |= 1 << i
		}
	}
	set(fNow, c.Now != 0)
	set(fName, c.Name != "")
	set(fOwner, c.Owner != "")
	set(fTTL, c.TTL != 0)
	set(fWait, c.Wait != 0)
	set(fLockDelay, c.LockDelay != 0)
	set(fRequestID, c.RequestID != "")
	set(fToken, c.Token != 0)
	set(fValue, len(c.Value) != 0)
	set(fDelta, c.Delta != 0)
	set(fOpID, c.OpID != "")
	set(fSlack, c.Slack != 0)
	set(fAttempt, c.Attempt != 0)
	set(fConfig, c.Config != (Config{}))
	set(fSession, c.Session != 0)
	set(fSeq, c.Seq != 0)
	set(fAck, c.Ack != 0)
	set(fClusterID, c.ClusterID != "")
	if c.Slack < 0 {
		return nil, fmt.Errorf("%w: negative slack %s", ErrBadCommand, c.Slack)
	}

	data := len(c.Name) + len(c.Owner) + len(c.RequestID) + len(c.Value) + len(c.OpID) + len(c.ClusterID)
	if data > MaxCommandBytes {
		return nil, fmt.Errorf("%w: %d bytes of data, more than %d", ErrBadCommand, data, MaxCommandBytes)
	}
	b := make([]byte, 0, 2+binary.MaxVarintLen64*(1+fieldCount)+data)
	b = append(b, CommandVersion, byte(c.Op))
	b = binary.AppendUvarint(b, mask)
	str := func(i int, s string) {
		if mask&(1<<i) != 0 {
			b = binary.AppendUvarint(b, uint64(len(s)))
			b = append(b, s...)
		}
	}
	num := func(i int, v int64) {
		if mask&(1<<i) != 0 {
			b = binary.AppendVarint(b, v)
		}
	}
	num(fNow, c.Now)
	str(fName, c.Name)
	str(fOwner, c.Owner)
	num(fTTL, int64(c.TTL))
	num(fWait, int64(c.Wait))
	num(fLockDelay, int64(c.LockDelay))
	str(fRequestID, c.RequestID)
	if mask&(1<<fToken) != 0 {
		b = binary.AppendUvarint(b, uint64(c.Token))
	}
	str(fValue, string(c.Value))
	num(fDelta, c.Delta)
	str(fOpID, c.OpID)
	if mask&(1<<fSlack) != 0 {
		b = binary.AppendUvarint(b, uint64(c.Slack))
	}
	if mask&(1<<fAttempt) != 0 {
		b = binary.AppendUvarint(b, uint64(c.Attempt))
	}
	if mask&(1<<fConfig) != 0 {
		vals := configInts(c.Config)
		var cmask uint64
		for i, v := range vals {
			if v != 0 {
				cmask |= 1 << i
			}
		}
		b = binary.AppendUvarint(b, cmask)
		for _, v := range vals {
			if v != 0 {
				b = binary.AppendVarint(b, v)
			}
		}
	}
	for _, f := range [...]struct {
		i int
		v uint64
	}{{fSession, c.Session}, {fSeq, c.Seq}, {fAck, c.Ack}} {
		if mask&(1<<f.i) != 0 {
			b = binary.AppendUvarint(b, f.v)
		}
	}
	str(fClusterID, c.ClusterID)
	if len(b) > MaxCommandBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrBadCommand, len(b), MaxCommandBytes)
	}
	return b, nil
}

func decodeCommand(out *Command, b []byte) error {
	if len(b) > MaxCommandBytes {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrBadCommand, len(b), MaxCommandBytes)
	}
	if len(b) < 3 {
		return fmt.Errorf("%w: %d bytes, too short", ErrBadCommand, len(b))
	}
	if b[0] != CommandVersion {
		return fmt.Errorf("%w: unknown version %d", ErrBadCommand, b[0])
	}
	d := decoder{b: b[2:]}
	c := Command{Op: Op(b[1])}
	mask := d.uvarint()
	d.zero = false // an empty mask is fine
	if d.err == nil && mask>>fieldCount != 0 {
		return fmt.Errorf("%w: unknown fields in mask %#x", ErrBadCommand, mask)
	}
	has := func(i int) bool { return d.err == nil && mask&(1<<i) != 0 }
	if has(fNow) {
		c.Now = d.varint()
	}
	if has(fName) {
		c.Name = d.str()
	}
	if has(fOwner) {
		c.Owner = d.str()
	}
	if has(fTTL) {
		c.TTL = time.Duration(d.varint())
	}
	if has(fWait) {
		c.Wait = time.Duration(d.varint())
	}
	if has(fLockDelay) {
		c.LockDelay = time.Duration(d.varint())
	}
	if has(fRequestID) {
		c.RequestID = d.str()
	}
	if has(fToken) {
		c.Token = fence.Token(d.uvarint())
	}
	if has(fValue) {
		c.Value = []byte(d.str())
	}
	if has(fDelta) {
		c.Delta = d.varint()
	}
	if has(fOpID) {
		c.OpID = d.str()
	}
	if has(fSlack) {
		v := d.uvarint()
		if v > math.MaxInt64 {
			return fmt.Errorf("%w: slack %d out of range", ErrBadCommand, v)
		}
		c.Slack = time.Duration(v)
	}
	if has(fAttempt) {
		v := d.uvarint()
		if v > math.MaxUint32 {
			return fmt.Errorf("%w: attempt %d out of range", ErrBadCommand, v)
		}
		c.Attempt = uint32(v)
	}
	if has(fConfig) {
		cmask := d.uvarint()
		if d.err == nil && cmask>>configFieldCount != 0 {
			return fmt.Errorf("%w: unknown config fields in mask %#x", ErrBadCommand, cmask)
		}
		var vals [configFieldCount]int64
		for i := range vals {
			if d.err == nil && cmask&(1<<i) != 0 {
				vals[i] = d.varint()
			}
		}
		c.Config = configOf(vals)
		if configInts(c.Config) != vals {
			return fmt.Errorf("%w: config field out of range", ErrBadCommand)
		}
	}
	if has(fSession) {
		c.Session = d.uvarint()
	}
	if has(fSeq) {
		c.Seq = d.uvarint()
	}
	if has(fAck) {
		c.Ack = d.uvarint()
	}
	if has(fClusterID) {
		c.ClusterID = d.str()
	}
	switch {
	case d.err != nil:
		return d.err
	case len(d.b) != 0:
		return fmt.Errorf("%w: %d trailing bytes", ErrBadCommand, len(d.b))
	case d.zero:
		return fmt.Errorf("%w: a field is present with a zero value", ErrBadCommand)
	}
	*out = c
	return nil
}

// decoder reads varints and strings, remembering the first error. Every read
// checks the remaining length first, so no input makes it panic or allocate
// more than the input's size.
type decoder struct {
	b    []byte
	err  error
	zero bool // a present field held a zero value (non-canonical)
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated or overlong %s", ErrBadCommand, what)
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || n != uvarintLen(v) {
		d.fail("varint")
		return 0
	}
	d.b = d.b[n:]
	if v == 0 {
		d.zero = true
	}
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 || n != uvarintLen(uint64(v)<<1^uint64(v>>63)) {
		d.fail("varint")
		return 0
	}
	d.b = d.b[n:]
	if v == 0 {
		d.zero = true
	}
	return v
}

func (d *decoder) str() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) || n > math.MaxInt32 {
		d.fail("string")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// uvarintLen is the length of the shortest encoding of v; longer encodings
// of the same number are refused so every command has one encoding.
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
