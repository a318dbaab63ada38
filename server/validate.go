package server

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
)

// The checks only a request's wire form can make, which its fence request
// cannot express: each is a fence.FieldCheck that the request's Validate
// judges in that field's place of its order.

// bindingJudged stands for a request's session binding, which the
// transport judges itself (a unary request's SessionRef before its fields,
// in withRef; a stream message's seq and ack after them, in stream.go).
var bindingJudged = fence.FieldCheck{Field: "session_ref"}

// duration reads an optional duration field (absent: 0) and refuses one
// that is not a valid duration.
func duration(field string, d *durationpb.Duration) (time.Duration, fence.FieldCheck) {
	c := fence.FieldCheck{Field: field}
	if d == nil {
		return 0, c
	}
	if err := d.CheckValid(); err != nil {
		c.Err = fence.Invalid(field, "a valid duration", "")
	}
	return d.AsDuration(), c
}

// ttl reads a ttl (absent: 0) and makes its wire check: a duration that is
// not valid, or a ttl given as 0 (which a fence request cannot tell from
// absent), refused as a ttl below the least.
func ttl(d *durationpb.Duration, max time.Duration) (time.Duration, fence.FieldCheck) {
	v, c := duration("ttl", d)
	if c.Err == nil && d != nil && v == 0 {
		c.Err = fence.ValidateTTL(0, max)
	}
	return v, c
}

// sessionTTL is an acquire's ttl check when the acquire is bound to a
// session: any ttl given is refused (the lease lasts as long as the
// session), however it is written.
func sessionTTL(session uint64, d *durationpb.Duration) fence.FieldCheck {
	return fence.FieldCheck{Field: "ttl", Err: fence.TTLWithSession(session, d.AsDuration())}
}

// wire is the wire checks among cs that refuse (a FieldCheck with no
// error would stand for a field the transport judged, and skip its check),
// with the binding judged by the transport.
func wire(cs ...fence.FieldCheck) []fence.FieldCheck {
	out := judgedOnly
	for _, c := range cs {
		if c.Err != nil {
			if len(out) == len(judgedOnly) {
				out = append(make([]fence.FieldCheck, 0, 1+len(cs)), judgedOnly...)
			}
			out = append(out, c)
		}
	}
	return out
}

// judgedOnly is the wire checks of a request with none that refuses: the
// binding's (never written to: wire copies it before appending).
var judgedOnly = []fence.FieldCheck{bindingJudged}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
