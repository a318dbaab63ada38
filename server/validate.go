package server

import (
	"fmt"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/internal/reqcheck"
)

// requiredTTL checks a ttl that must be present, in [MinTTL, max].
func requiredTTL(d *durationpb.Duration, max time.Duration) (time.Duration, error) {
	if d == nil {
		return 0, reqcheck.TTLRequired(max)
	}
	return optionalTTL(d, max)
}

// optionalTTL checks a ttl that may be absent (0 = absent).
func optionalTTL(d *durationpb.Duration, max time.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	if err := d.CheckValid(); err != nil {
		return 0, fence.Invalid("ttl", "a valid duration", "")
	}
	ttl := d.AsDuration()
	return ttl, fence.ValidateTTL(ttl, max)
}

// optionalDuration checks wait or lock_delay: absent is 0, else [0, max].
func optionalDuration(field string, d *durationpb.Duration, max time.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	if err := d.CheckValid(); err != nil {
		return 0, fence.Invalid(field, "a valid duration", "")
	}
	v := d.AsDuration()
	return v, fence.ValidateDuration(field, v, max)
}

// validatePrefix checks a List prefix: may be empty, else like a name.
func validatePrefix(p string) error {
	switch {
	case len(p) > fence.MaxNameBytes:
		return fence.Invalid("prefix", fmt.Sprintf("at most %d bytes", fence.MaxNameBytes), fmt.Sprintf("(%d bytes)", len(p)))
	case !utf8.ValidString(p):
		return fence.Invalid("prefix", "valid UTF-8", "")
	}
	return nil
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
