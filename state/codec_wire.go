package state

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/fenceworks/fence"
)

// The command codec on the hot path (every proposal is encoded once and
// decoded on every replica) writes and reads statepb.Command's bytes with
// protowire directly: the same bytes the protobuf runtime's deterministic
// marshal writes (fields in number order, zero values absent;
// TestWireCodecMatchesTheRuntime holds it to the runtime on the golden
// commands and random ones), at a fraction of the cost of building a
// message and walking it by reflection.

// Field numbers of statepb.Command and statepb.Config.
const (
	fOp, fNow, fSlack, fName, fOwner, fTTL, fWait, fLockDelay, fRequestID, fToken = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
	fValue, fDelta, fOpID, fAttempt, fConfig, fSession, fSeq, fAck, fClusterID    = 11, 12, 13, 14, 15, 16, 17, 18, 19
	fPrincipal, fAdmin, fRoles, fPerms, fQuota, fMode, fPermits, fLocks           = 20, 21, 22, 23, 24, 25, 26, 27
	lastCommandField                                                              = fLocks
	lastConfigField                                                               = 17
	lastQuotaField                                                                = 6
)

func appendUint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func appendSint(b []byte, num protowire.Number, v int64) []byte {
	return appendUint(b, num, protowire.EncodeZigZag(v))
}

func appendStr(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}

// configInts are c's fields in statepb.Config's field order (1..13).
func configInts(c Config) [lastConfigField]int64 {
	return [lastConfigField]int64{int64(c.MaxTTL), int64(c.MaxOps), int64(c.MaxRequests), int64(c.IDRetention),
		int64(c.MinIDRetention), int64(c.MaxWaitersPerLock), int64(c.MaxWaiters), int64(c.MaxResources),
		c.MaxResourceBytes, int64(c.MaxLocks), int64(c.MaxSessions), int64(c.MaxSessionResults), int64(c.MaxLockDelay),
		int64(c.MaxSessionsPerPrincipal), int64(c.MaxWaitersPerPrincipal), int64(c.MaxIDsPerPrincipal), int64(c.MaxLocksPerPrincipal)}
}

func configOfInts(v [lastConfigField]int64) Config {
	return Config{MaxTTL: time.Duration(v[0]), MaxOps: int(v[1]), MaxRequests: int(v[2]), IDRetention: time.Duration(v[3]),
		MinIDRetention: time.Duration(v[4]), MaxWaitersPerLock: int(v[5]), MaxWaiters: int(v[6]), MaxResources: int(v[7]),
		MaxResourceBytes: v[8], MaxLocks: int(v[9]), MaxSessions: int(v[10]), MaxSessionResults: int(v[11]),
		MaxLockDelay: time.Duration(v[12]), MaxSessionsPerPrincipal: int(v[13]), MaxWaitersPerPrincipal: int(v[14]),
		MaxIDsPerPrincipal: int(v[15]), MaxLocksPerPrincipal: int(v[16])}
}

func appendConfig(b []byte, c Config) []byte {
	if c == (Config{}) {
		return b
	}
	var inner []byte
	for i, v := range configInts(c) {
		inner = appendSint(inner, protowire.Number(i+1), v)
	}
	return protowire.AppendBytes(protowire.AppendTag(b, fConfig, protowire.BytesType), inner)
}

// appendCommand appends c as a statepb.Command (without the version byte).
func appendCommand(b []byte, c Command) []byte {
	b = appendUint(b, fOp, uint64(c.Op))
	b = appendSint(b, fNow, c.Now)
	b = appendUint(b, fSlack, uint64(c.Slack))
	b = appendStr(b, fName, c.Name)
	b = appendStr(b, fOwner, c.Owner)
	b = appendSint(b, fTTL, int64(c.TTL))
	b = appendSint(b, fWait, int64(c.Wait))
	b = appendSint(b, fLockDelay, int64(c.LockDelay))
	b = appendStr(b, fRequestID, c.RequestID)
	b = appendUint(b, fToken, uint64(c.Token))
	if len(c.Value) > 0 {
		b = protowire.AppendBytes(protowire.AppendTag(b, fValue, protowire.BytesType), c.Value)
	}
	b = appendSint(b, fDelta, c.Delta)
	b = appendStr(b, fOpID, c.OpID)
	b = appendUint(b, fAttempt, uint64(c.Attempt))
	b = appendConfig(b, c.Config)
	b = appendUint(b, fSession, c.Session)
	b = appendUint(b, fSeq, c.Seq)
	b = appendUint(b, fAck, c.Ack)
	b = appendStr(b, fClusterID, c.ClusterID)
	b = appendStr(b, fPrincipal, c.Principal)
	if c.Admin {
		b = appendUint(b, fAdmin, 1)
	}
	for _, r := range c.Roles {
		b = protowire.AppendString(protowire.AppendTag(b, fRoles, protowire.BytesType), r)
	}
	for _, p := range c.Perms {
		b = protowire.AppendBytes(protowire.AppendTag(b, fPerms, protowire.BytesType), permBytes(p))
	}
	if c.Quota != (Quota{}) {
		b = protowire.AppendBytes(protowire.AppendTag(b, fQuota, protowire.BytesType), appendQuota(nil, c.Quota))
	}
	b = appendUint(b, fMode, uint64(c.Mode))
	b = appendUint(b, fPermits, uint64(c.Permits))
	for _, l := range c.Locks {
		b = protowire.AppendBytes(protowire.AppendTag(b, fLocks, protowire.BytesType), appendLockSpec(nil, l))
	}
	return b
}

// appendLockSpec appends l as a statepb.LockSpec's fields.
func appendLockSpec(b []byte, l fence.LockSpec) []byte {
	b = appendStr(b, 1, l.Name)
	b = appendUint(b, 2, uint64(l.Mode))
	return appendUint(b, 3, uint64(l.Permits))
}

// readLockSpec reads what appendLockSpec wrote.
func readLockSpec(b []byte) (fence.LockSpec, error) {
	var l fence.LockSpec
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return l, protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return l, protowire.ParseError(n)
			}
			b = b[n:]
			l.Name = string(v)
		case (num == 2 || num == 3) && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return l, protowire.ParseError(n)
			}
			b = b[n:]
			if num == 2 {
				if v > math.MaxUint8 {
					return l, fmt.Errorf("mode %d out of range", v)
				}
				l.Mode = fence.Mode(v)
			} else {
				if v > math.MaxUint32 {
					return l, fmt.Errorf("permits %d out of range", v)
				}
				l.Permits = uint32(v)
			}
		default:
			return l, errors.New("unknown field in LockSpec")
		}
	}
	return l, nil
}

// quotaInts are q's fields in statepb.Quota's field order.
func quotaInts(q Quota) [lastQuotaField]int64 {
	return [lastQuotaField]int64{int64(q.Sessions), int64(q.Waiters), int64(q.IDs), int64(q.Conns), int64(q.Streams), int64(q.Locks)}
}

func quotaOfInts(v [lastQuotaField]int64) Quota {
	return Quota{Sessions: int(v[0]), Waiters: int(v[1]), IDs: int(v[2]), Conns: int(v[3]), Streams: int(v[4]), Locks: int(v[5])}
}

// appendQuota appends q as a statepb.Quota's fields.
func appendQuota(b []byte, q Quota) []byte {
	for i, v := range quotaInts(q) {
		b = appendSint(b, protowire.Number(i+1), v)
	}
	return b
}

// readQuota reads what appendQuota wrote.
func readQuota(b []byte) (Quota, error) {
	var v [lastQuotaField]int64
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return Quota{}, protowire.ParseError(n)
		}
		b = b[n:]
		if num < 1 || num > lastQuotaField || typ != protowire.VarintType {
			return Quota{}, errors.New("unknown field in Quota")
		}
		x, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return Quota{}, protowire.ParseError(n)
		}
		b = b[n:]
		v[num-1] = protowire.DecodeZigZag(x)
	}
	q := quotaOfInts(v)
	if quotaInts(q) != v {
		return Quota{}, errors.New("quota field out of range")
	}
	return q, nil
}

// permBytes is p as stored: its kind byte, then its prefix.
func permBytes(p Permission) []byte { return append([]byte{byte(p.Kind)}, p.Prefix...) }

// permOf reads what permBytes wrote.
func permOf(b []byte) (Permission, error) {
	if len(b) == 0 {
		return Permission{}, errors.New("empty permission")
	}
	return Permission{Kind: PermKind(b[0]), Prefix: string(b[1:])}, nil
}

// errUnknownCommandField and errUnknownConfigField name a field this
// binary does not know (or a known one with another wire type).
var (
	errUnknownCommandField = errors.New("unknown field in Command")
	errUnknownConfigField  = errors.New("unknown field in Config")
)

// bytesField reports whether num of statepb.Command is a bytes field.
func bytesField(num protowire.Number) bool {
	switch num {
	case fName, fOwner, fRequestID, fValue, fOpID, fConfig, fClusterID, fPrincipal, fRoles, fPerms, fQuota, fLocks:
		return true
	}
	return false
}

// readCommand reads b (a statepb.Command) into c; b must then be exactly
// what appendCommand writes of c (the caller checks).
func readCommand(b []byte, c *Command) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if num < 1 || num > lastCommandField || bytesField(num) != (typ == protowire.BytesType) ||
			!bytesField(num) && typ != protowire.VarintType {
			return errUnknownCommandField
		}
		if typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			switch num {
			case fName:
				c.Name = string(v)
			case fOwner:
				c.Owner = string(v)
			case fRequestID:
				c.RequestID = string(v)
			case fValue:
				c.Value = bytes.Clone(v)
			case fOpID:
				c.OpID = string(v)
			case fClusterID:
				c.ClusterID = string(v)
			case fPrincipal:
				c.Principal = string(v)
			case fRoles:
				c.Roles = append(c.Roles, string(v))
			case fPerms:
				p, err := permOf(v)
				if err != nil {
					return err
				}
				c.Perms = append(c.Perms, p)
			case fQuota:
				q, err := readQuota(v)
				if err != nil {
					return err
				}
				c.Quota = q
			case fLocks:
				l, err := readLockSpec(v)
				if err != nil {
					return err
				}
				c.Locks = append(c.Locks, l)
			case fConfig:
				cfg, err := readConfig(v)
				if err != nil {
					return err
				}
				c.Config = cfg
			}
			continue
		}
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		switch num {
		case fOp:
			if v > math.MaxUint8 {
				return fmt.Errorf("op %d out of range", v)
			}
			c.Op = Op(v)
		case fNow:
			c.Now = protowire.DecodeZigZag(v)
		case fSlack:
			if v > math.MaxInt64 {
				return fmt.Errorf("slack %d out of range", v)
			}
			c.Slack = time.Duration(v)
		case fTTL:
			c.TTL = time.Duration(protowire.DecodeZigZag(v))
		case fWait:
			c.Wait = time.Duration(protowire.DecodeZigZag(v))
		case fLockDelay:
			c.LockDelay = time.Duration(protowire.DecodeZigZag(v))
		case fToken:
			c.Token = fence.Token(v)
		case fDelta:
			c.Delta = protowire.DecodeZigZag(v)
		case fAttempt:
			c.Attempt = uint32(v) // a larger value re-encodes otherwise: not canonical
		case fSession:
			c.Session = v
		case fSeq:
			c.Seq = v
		case fAck:
			c.Ack = v
		case fMode:
			if v > math.MaxUint8 {
				return fmt.Errorf("mode %d out of range", v)
			}
			c.Mode = fence.Mode(v)
		case fPermits:
			if v > math.MaxUint32 {
				return fmt.Errorf("permits %d out of range", v)
			}
			c.Permits = uint32(v)
		case fAdmin:
			if v != 1 {
				return fmt.Errorf("admin %d is not a bool", v)
			}
			c.Admin = true
		}
	}
	return nil
}

func readConfig(b []byte) (Config, error) {
	var v [lastConfigField]int64
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return Config{}, protowire.ParseError(n)
		}
		b = b[n:]
		if num < 1 || num > lastConfigField || typ != protowire.VarintType {
			return Config{}, errUnknownConfigField
		}
		x, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return Config{}, protowire.ParseError(n)
		}
		b = b[n:]
		v[num-1] = protowire.DecodeZigZag(x)
	}
	c := configOfInts(v)
	if configInts(c) != v {
		return Config{}, errors.New("config field out of range")
	}
	return c, nil
}
