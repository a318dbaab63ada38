package server

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/fenceworks/fence"
)

// Bounds of the client deadline headers, from the Connect and gRPC
// protocol specifications.
const (
	connectTimeoutBound = "1 to 10 ASCII digits, a positive number of milliseconds"
	grpcTimeoutBound    = "1 to 8 ASCII digits and a unit (H, M, S, m, u or n)"
)

// timeoutError is the refusal of an API request whose deadline header is malformed,
// made the way every other bad input is refused: invalid_argument with an
// ErrorDetail naming the header and its bound (apiFront answers it, in
// front of Connect and of serveJSON). Connect's own refusal of a malformed value carries
// no detail, and it reads Connect-Timeout-Ms 0 or -5 as a deadline already
// past (deadline_exceeded at once), which no Connect client sends: a client
// whose deadline has passed does not call. grpc-timeout "0n" is what gRPC
// clients send for a deadline already past, so it stays accepted
// (deadline_exceeded); only a malformed grpc-timeout is refused.
//
// timeoutError checks the deadline header of the request's protocol: the
// gRPC one (grpc-timeout, for gRPC and gRPC-Web) or Connect's
// (Connect-Timeout-Ms). An absent or empty header is no deadline.
func timeoutError(h http.Header) error {
	if strings.HasPrefix(h.Get("Content-Type"), "application/grpc") {
		if v := h.Get("Grpc-Timeout"); v != "" && !validGRPCTimeout(v) {
			return fence.Invalid("grpc-timeout", grpcTimeoutBound, shortQuote(v))
		}
		return nil
	}
	if v := h.Get("Connect-Timeout-Ms"); v != "" && !validConnectTimeout(v) {
		return fence.Invalid("Connect-Timeout-Ms", connectTimeoutBound, shortQuote(v))
	}
	return nil
}

// validConnectTimeout: 1 to 10 ASCII digits, not zero.
func validConnectTimeout(v string) bool {
	return len(v) <= 10 && allDigits(v) && strings.Trim(v, "0") != ""
}

// validGRPCTimeout: 1 to 8 ASCII digits, then one unit letter.
func validGRPCTimeout(v string) bool {
	if len(v) < 2 || !strings.ContainsRune("HMSmun", rune(v[len(v)-1])) {
		return false
	}
	digits := v[:len(v)-1]
	return len(digits) <= 8 && allDigits(digits)
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// shortQuote quotes a header value for an error message, cut to 32 bytes.
func shortQuote(v string) string {
	if len(v) > 32 {
		return strconv.Quote(v[:32]) + "..."
	}
	return strconv.Quote(v)
}
