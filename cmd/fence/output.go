package main

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
	"github.com/fenceworks/fence/cluster"
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

// fail reports err and returns its exit code: one line on stderr (see
// errorLine), and with --json also {"error": {...}} on stdout: reason,
// message and the facts with the names of the API's JSON error body
// (holderToken, lastToken, ...). An unreachable server gets a hint naming
// --server and FENCE_SERVER.
func fail(g *globals, stdout, stderr io.Writer, err error) int {
	// A TLS handshake that no retry fixes (another CA, an expired
	// certificate, ...) is said in words, also when it came through a
	// command that calls the API without the client package.
	if te := client.TLSFailure(g.server, err); te != nil {
		err = te
	}
	fmt.Fprintln(stderr, errorLine(g.cmd, err))
	if h := caHint(g, err); h != "" {
		fmt.Fprintln(stderr, h)
	}
	var unreachable *client.UnreachableError
	if errors.As(err, &unreachable) {
		fmt.Fprintf(stderr, "hint: is a server running there? Start one with `fence serve`, or point --server or FENCE_SERVER at yours.\n")
	}
	if g.json {
		_ = json.NewEncoder(stdout).Encode(map[string]any{"error": errorJSON(err)})
	}
	return exitCodeOf(err)
}

// errorLine is the line fail prints for err: "REASON: message" for a
// refusal of the API (BUSY, STALE_TOKEN, ...), else "fence: CMD: message"
// ("fence: message" outside a command) — each said once (errorText).
func errorLine(cmd string, err error) string {
	if reason := fence.ReasonOf(err); reason != "" {
		return fmt.Sprintf("%s: %s", reason, strings.TrimPrefix(errorText(err), "fence: "))
	}
	if cmd == "" {
		return "fence: " + errorBody("", err)
	}
	return "fence: " + cmd + ": " + errorBody(cmd, err)
}

// errorBody is errorText without its "fence: " and "CMD: " prefixes.
func errorBody(cmd string, err error) string {
	body := strings.TrimPrefix(errorText(err), "fence: ")
	if cmd != "" {
		body = strings.TrimPrefix(body, cmd+": ")
	}
	return body
}

// errorText is err's message with each thing said once. An error that
// crossed the wire is wrapped three times over — the client's "fence: OP:",
// Connect's "CODE:" and the server's own message, which starts with the
// package's "fence: CODE:" again — so "fence: acquire: unavailable: fence:
// unavailable: no leader known (node: not the leader)" reads "fence:
// acquire: unavailable: no leader known". Only the text changes: err itself,
// its errors.Is/As and its facts are printed and encoded as they are.
func errorText(err error) string {
	msg := err.Error()
	// cluster.ErrNoLeader wraps node.ErrNotLeader, "(node: not the
	// leader)", which only repeats that no leader is known.
	msg = strings.ReplaceAll(msg, cluster.ErrNoLeader.Error(), fence.ErrUnavailable.Error()+": no leader known")
	parts := strings.Split(msg, ": ")
	out := make([]string, 0, len(parts))
	for i, p := range parts {
		if i > 0 && p == "fence" { // a "fence: " inside: said at the start already
			continue
		}
		if n := len(out); n > 0 && strings.EqualFold(out[n-1], p) { // "unavailable: unavailable"
			continue
		}
		out = append(out, p)
	}
	return strings.Join(out, ": ")
}

// errorJSON is the error object: reason, message and the facts.
func errorJSON(err error) map[string]any {
	out := map[string]any{"message": errorText(err)}
	var unreachable *client.UnreachableError
	if errors.As(err, &unreachable) {
		out["unreachable"] = unreachable.URL
	}
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
		limit   *fence.ResourceExhaustedError
		session *fence.SessionExpiredError
		permits *fence.PermitsMismatchError
	)
	switch {
	case errors.As(err, &busy):
		out["name"], out["holder"], out["holderToken"] = busy.Name, busy.Holder, uint64(busy.Token)
		out["remaining"], out["delayed"], out["waited"] = jsonDuration(busy.Remaining), busy.Delayed, busy.Waited
		if busy.Queued > 0 {
			out["queued"] = busy.Queued
		}
	case errors.As(err, &stale):
		out["name"], out["token"], out["lastToken"] = stale.Resource, uint64(stale.Token), uint64(stale.LastAccepted)
	case errors.As(err, &holder):
		out["name"], out["token"] = holder.Name, uint64(holder.Token)
	case errors.As(err, &expired):
		out["name"], out["token"] = expired.Name, uint64(expired.Token)
	case errors.As(err, &unknown):
		out["token"], out["lastToken"] = uint64(unknown.Token), uint64(unknown.LastIssued) // the API's facts name it so: the last issued token
	case errors.As(err, &op):
		out["field"], out["id"] = op.Field, op.ID
	case errors.As(err, &inv):
		out["field"], out["bound"] = inv.Field, inv.Bound
		if inv.Value != "" {
			out["got"] = inv.Value
		}
	case errors.As(err, &session):
		out["session"] = session.Session
	case errors.As(err, &permits):
		out["name"], out["permits"], out["currentPermits"] = permits.Name, permits.Permits, permits.Current
	case errors.As(err, &limit):
		out["limit"], out["bound"] = limit.Limit, limit.Bound
		if limit.Got != "" {
			out["got"] = limit.Got
		}
	}
	return out
}

// jsonDuration renders d as the API's JSON does (proto3 JSON: seconds with
// an "s" suffix and 0, 3, 6 or 9 decimals: "5s", "0.250s", "90s").
func jsonDuration(d time.Duration) string {
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	secs, nanos := int64(d/time.Second), int64(d%time.Second)
	frac := ""
	switch {
	case nanos == 0:
	case nanos%1e6 == 0:
		frac = fmt.Sprintf(".%03d", nanos/1e6)
	case nanos%1e3 == 0:
		frac = fmt.Sprintf(".%06d", nanos/1e3)
	default:
		frac = fmt.Sprintf(".%09d", nanos)
	}
	return fmt.Sprintf("%s%d%ss", sign, secs, frac)
}

// valueJSON renders a value as the API's JSON does: base64, and as text
// when it is valid UTF-8 (nil otherwise).
func valueJSON(v []byte) (b64 string, text *string) {
	if utf8.Valid(v) {
		s := string(v)
		text = &s
	}
	return base64.StdEncoding.EncodeToString(v), text
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

// caHint is the hint under a TLS failure for a server certificate no
// trusted CA signed: what the CLI trusted, "" for any other error.
func caHint(g *globals, err error) string {
	var unknownCA x509.UnknownAuthorityError
	if !errors.As(err, &unknownCA) {
		return ""
	}
	if g.tls.cacert == "" {
		return "hint: no --cacert (FENCE_CACERT) was given, so only the system's CAs were trusted: give the CA certificate that signed the server's (for `fence cert`, its ca.crt)"
	}
	return fmt.Sprintf("hint: --cacert %s does not hold the CA that signed the server's certificate: give that CA's certificate (the one its operator's --cert-file was issued from)", g.tls.cacert)
}
