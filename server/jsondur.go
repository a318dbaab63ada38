package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fenceworks/fence"
)

// Durations in a JSON request (docs/api.md, "The JSON contract"): proto3
// JSON writes a google.protobuf.Duration as a string of seconds with an "s"
// ("30s", "0.25s") and its decoder refuses anything else. People write
// "ttl": 30 and "wait": "250ms"; so a request may give a duration as
//
//   - a JSON number of seconds, fractions allowed: 30, 0.25, 1e-3;
//   - a proto3 string: "30s", "0.250s";
//   - a Go duration string: "250ms", "1m30s", "1h", "1.5s".
//
// normalizeDurations rewrites every such value into the proto3 form before
// the protobuf decoder sees the body; anything else is refused naming the
// field, with examples (durationBound). Replies keep the proto3 form.

// durationBound is the rule a duration in a JSON request must follow.
const durationBound = `a duration: a number of seconds (30, 0.25) or a string such as "30s", "250ms" or "1m30s"`

// maxDurationSeconds is the range of google.protobuf.Duration.
const maxDurationSeconds = 315_576_000_000

// protoDuration matches a duration in proto3 JSON form.
var protoDuration = regexp.MustCompile(`^-?[0-9]+(\.[0-9]{1,9})?s$`)

// normalizeDurations returns body, a JSON object for a message of type md,
// with every Duration field (also inside message fields: session, a
// stream's acquire) in proto3 form. It returns body itself when nothing
// needed rewriting, and body unchanged with a nil error when body is not a
// JSON object (the decoder refuses it in its own words). A duration it
// cannot read is an *fence.InvalidError naming the field.
func normalizeDurations(body []byte, md protoreflect.MessageDescriptor) ([]byte, error) {
	// Malformed JSON is left alone: rewritten from the members read before
	// the fault (`{"ttl":30} extra`, `{"ttl":30,`) it would become a valid
	// body, and be accepted.
	if !hasDurations(md, 0) || !json.Valid(body) {
		return body, nil
	}
	return normalizeIn(body, md, "")
}

func normalizeIn(body []byte, md protoreflect.MessageDescriptor, prefix string) ([]byte, error) {
	if jsonKind(body) != "" || !hasDurations(md, 0) {
		return body, nil
	}
	members := objectMembers(body)
	changed := false
	for i, m := range members {
		fd := jsonField(md, m.name)
		if fd == nil || fd.IsList() || fd.IsMap() || fd.Kind() != protoreflect.MessageKind {
			continue
		}
		var (
			v   []byte
			err error
		)
		if fd.Message().FullName() == "google.protobuf.Duration" {
			v, err = protoDurationJSON(m.value)
			if errors.Is(err, errDurationRange) {
				// Named as sent, not as the largest duration it saturates to.
				return nil, fence.Invalid(prefix+string(fd.Name()), "at most "+maxDurationText+" (the largest duration; each field's own bound is lower)", sentText(m.value))
			}
			if err != nil {
				return nil, fence.Invalid(prefix+string(fd.Name()), durationBound, "")
			}
		} else {
			v, err = normalizeIn(m.value, fd.Message(), prefix+string(fd.Name())+".")
			if err != nil {
				return nil, err
			}
		}
		if string(v) != string(m.value) {
			members[i].value, changed = v, true
		}
	}
	if !changed {
		return body, nil
	}
	return writeObject(members), nil
}

// hasDurations reports whether md has a Duration field, itself or in a
// message field (to a small depth: the request messages nest two deep).
func hasDurations(md protoreflect.MessageDescriptor, depth int) bool {
	if depth > 3 {
		return false
	}
	fs := md.Fields()
	for i := 0; i < fs.Len(); i++ {
		fd := fs.Get(i)
		if fd.Kind() != protoreflect.MessageKind || fd.IsMap() {
			continue
		}
		if fd.Message().FullName() == "google.protobuf.Duration" || hasDurations(fd.Message(), depth+1) {
			return true
		}
	}
	return false
}

// protoDurationJSON is raw, one JSON value given for a Duration, as a
// proto3 JSON duration (null stays null: the field is absent).
func protoDurationJSON(raw []byte) ([]byte, error) {
	switch jsonKind(raw) {
	case "null":
		return raw, nil
	case "a number":
		var r big.Rat
		if _, ok := r.SetString(string(raw)); !ok {
			return nil, fmt.Errorf("not a number")
		}
		ns, err := exactNanoseconds(new(big.Rat).Mul(&r, big.NewRat(int64(time.Second), 1)))
		if err != nil {
			return nil, err
		}
		return durationString(ns)
	case "a string":
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		// Read exactly (a proto3 string is a Go duration string too):
		// finer than a nanosecond or beyond a time.Duration is refused,
		// never truncated or saturated.
		ns, err := parseDurationExact(s)
		if err != nil {
			return nil, err
		}
		if protoDuration.MatchString(s) {
			return raw, nil
		}
		return durationString(ns)
	}
	return nil, fmt.Errorf("not a number or a string")
}

// durationString writes ns nanoseconds as a proto3 JSON duration.
func durationString(ns *big.Int) ([]byte, error) {
	sec, frac := new(big.Int).QuoRem(ns, big.NewInt(int64(time.Second)), new(big.Int))
	if sec.CmpAbs(big.NewInt(maxDurationSeconds)) > 0 {
		return nil, fmt.Errorf("out of range")
	}
	s := sec.String()
	if ns.Sign() < 0 && sec.Sign() == 0 {
		s = "-0"
	}
	if f := frac.Int64(); f != 0 {
		s += "." + fmt.Sprintf("%09d", max(f, -f))
	}
	return []byte(strconv.Quote(s + "s")), nil
}

// sentText is raw, a JSON value, as the client wrote it: a string's
// contents, else the JSON text.
func sentText(raw []byte) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}
