package main

import (
	"io"
	"testing"
)

// TestServeWithoutFlagsIsValid: `fence serve` with no flag and no FENCE_*
// variable builds a daemon configuration its Validate accepts — every
// setting, including those no flag sets, has its default.
func TestServeWithoutFlagsIsValid(t *testing.T) {
	fs, o := serveFlags(&globals{}, io.Discard)
	if _, err := parseServe(fs, nil, func(string) string { return "" }); err != nil {
		t.Fatalf("parsing no flags: %v", err)
	}
	if err := o.daemonConfig().Validate(); err != nil {
		t.Fatalf("fence serve without flags: %v", err)
	}
}
