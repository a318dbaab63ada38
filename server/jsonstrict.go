package server

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"regexp"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fenceworks/fence"
)

// Integers given as strings (docs/api.md, "The JSON contract" 1: a number
// or a decimal string): protojson also takes "1e2", "1.0" (as 100 and 1)
// and refuses "01". The rule is the strict one, the pattern openapi.yaml
// gives: decimal digits with no leading zero ("0" itself aside), a minus
// sign for signed fields. And a token given as null is refused as null,
// not read as an absent 0 ("invalid token 0").

var (
	unsignedDigits = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)
	signedDigits   = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)
)

// checkIntegers returns an *fence.InvalidError for the first 64-bit
// integer field of body (a JSON object of message md, nested messages
// included) given as a string that is not decimal digits, or a token given
// as null; nil when there is none.
func checkIntegers(body []byte, md protoreflect.MessageDescriptor, prefix string, depth int) error {
	if jsonKind(body) != "" || depth > 3 {
		return nil
	}
	for _, m := range objectMembers(body) {
		fd := jsonField(md, m.name)
		if fd == nil || fd.IsMap() || fd.IsList() {
			continue
		}
		name := prefix + string(fd.Name())
		switch fd.Kind() {
		case protoreflect.MessageKind:
			if fd.Message().FullName().Parent() == "google.protobuf" {
				continue
			}
			if err := checkIntegers(m.value, fd.Message(), name+".", depth+1); err != nil {
				return err
			}
		case protoreflect.Uint64Kind, protoreflect.Fixed64Kind, protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
			kind := jsonKind(m.value)
			if kind == "null" && fd.Name() == "token" {
				return fence.Invalid(name, "a token (a positive integer), not null", "null")
			}
			if kind != "a string" {
				continue
			}
			var s string
			if json.Unmarshal(m.value, &s) != nil {
				continue
			}
			re := unsignedDigits
			if fd.Kind() != protoreflect.Uint64Kind && fd.Kind() != protoreflect.Fixed64Kind {
				re = signedDigits
			}
			if !re.MatchString(s) {
				// In the words the decoder's refusal of "01" gets.
				return fence.Invalid(name, fieldBound(fd, m.value), "")
			}
		}
	}
	return nil
}

// Go duration strings, read exactly: time.ParseDuration truncates what is
// finer than a nanosecond ("1.0000000005s" is 1s, "0.5ns" 0) and saturates
// nothing but refuses overflow; a number of seconds is read exactly (big.Rat)
// and refused when finer. Both forms follow one rule here.

var (
	errFinerThanNanosecond = errors.New("finer than a nanosecond")
	errDurationRange       = errors.New("out of range")
)

// goDurationUnits are time.ParseDuration's units, in nanoseconds.
var goDurationUnits = map[string]int64{
	"ns": 1, "us": 1e3, "µs": 1e3, "μs": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9,
}

// goDurationPart is one number and unit of a Go duration string.
var goDurationPart = regexp.MustCompile(`^([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)`)

// parseDurationExact reads s (a Go duration string, which includes the
// proto3 form "30s", "0.250s") as a whole number of nanoseconds: an error
// for bad syntax, errFinerThanNanosecond, or errDurationRange beyond what
// a time.Duration holds.
func parseDurationExact(s string) (*big.Int, error) {
	orig := s
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if s == "0" {
		return new(big.Int), nil
	}
	if s == "" {
		return nil, errors.New("invalid duration " + orig)
	}
	total := new(big.Rat)
	for s != "" {
		p := goDurationPart.FindStringSubmatch(s)
		if p == nil || p[1] == "" || p[1] == "." {
			return nil, errors.New("invalid duration " + orig)
		}
		var r big.Rat
		if _, ok := r.SetString(p[1]); !ok {
			return nil, errors.New("invalid duration " + orig)
		}
		total.Add(total, r.Mul(&r, new(big.Rat).SetInt64(goDurationUnits[p[2]])))
		s = s[len(p[0]):]
	}
	if neg {
		total.Neg(total)
	}
	return exactNanoseconds(total)
}

// exactNanoseconds is ns, a number of nanoseconds, as an integer within a
// time.Duration's range.
func exactNanoseconds(ns *big.Rat) (*big.Int, error) {
	if !ns.IsInt() {
		return nil, errFinerThanNanosecond
	}
	n := ns.Num()
	if n.CmpAbs(big.NewInt(math.MaxInt64)) > 0 {
		return nil, errDurationRange
	}
	return n, nil
}

// maxDurationText is the largest duration a field can hold.
var maxDurationText = time.Duration(math.MaxInt64).String()
