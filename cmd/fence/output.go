package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/fenceworks/fence"
)

// emit prints the result of a command: obj as one JSON object with --json,
// else the human line.
func emit(g *globals, stdout io.Writer, human string, obj any) {
	if g.json {
		enc := json.NewEncoder(stdout)
		_ = enc.Encode(obj)
		return
	}
	fmt.Fprintln(stdout, human)
}

// fail reports err and returns its exit code: "REASON: message" on stderr,
// and with --json also {"error": {...}} on stdout.
func fail(g *globals, stdout, stderr io.Writer, err error) int {
	reason := fence.ReasonOf(err)
	if reason != "" {
		fmt.Fprintf(stderr, "%s: %v\n", reason, err)
	} else if msg := err.Error(); strings.HasPrefix(msg, "fence: ") {
		fmt.Fprintln(stderr, msg) // the client's errors already say "fence: "
	} else {
		fmt.Fprintf(stderr, "fence: %s\n", msg)
	}
	if g.json {
		_ = json.NewEncoder(stdout).Encode(map[string]any{"error": errorJSON(err)})
	}
	return exitCodeOf(err)
}

// errorJSON is the error object: reason, message and the facts.
func errorJSON(err error) map[string]any {
	out := map[string]any{"message": err.Error()}
	if r := fence.ReasonOf(err); r != "" {
		out["reason"] = string(r)
	}
	var (
		busy    *fence.BusyError
		stale   *fence.StaleTokenError
		holder  *fence.NotHolderError
		expired *fence.LeaseExpiredError
		unknown *fence.UnknownTokenError
		op      *fence.OpConflictError
		inv     *fence.InvalidError
	)
	switch {
	case errors.As(err, &busy):
		out["name"], out["holder"], out["holder_token"] = busy.Name, busy.Holder, uint64(busy.Token)
		out["remaining"], out["delayed"], out["waited"] = busy.Remaining.String(), busy.Delayed, busy.Waited
	case errors.As(err, &stale):
		out["resource"], out["token"], out["last_accepted"] = stale.Resource, uint64(stale.Token), uint64(stale.LastAccepted)
	case errors.As(err, &holder):
		out["name"], out["token"] = holder.Name, uint64(holder.Token)
	case errors.As(err, &expired):
		out["name"], out["token"] = expired.Name, uint64(expired.Token)
	case errors.As(err, &unknown):
		out["token"], out["last_issued"] = uint64(unknown.Token), uint64(unknown.LastIssued)
	case errors.As(err, &op):
		out["field"], out["id"] = op.Field, op.ID
	case errors.As(err, &inv):
		out["field"], out["bound"] = inv.Field, inv.Bound
	}
	return out
}

// valueJSON renders a value as text when it is valid UTF-8, else as base64
// with base64 set.
func valueJSON(v []byte) (text string, isBase64 bool) {
	if utf8.Valid(v) {
		return string(v), false
	}
	return base64.StdEncoding.EncodeToString(v), true
}

// valueHuman renders a value for a human line: as is when it is printable
// text without spaces, quoted when it is other text, base64 otherwise.
func valueHuman(v []byte) string {
	if !utf8.Valid(v) {
		return "base64:" + base64.StdEncoding.EncodeToString(v)
	}
	s := string(v)
	for _, r := range s {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}

// nameHuman renders a lock, resource or owner name for a human line: as is
// when every character is printable, quoted otherwise, so that a name with a
// tab, newline, NUL or terminal escape cannot break a table or the terminal.
func nameHuman(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
