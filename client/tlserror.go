package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
)

// TLSError: a call failed because TLS with the server at URL could not be
// set up, for a reason retrying does not change: the server's certificate
// is not signed by a CA the client trusts, has expired or does not name
// the host dialled; the server refused the client's certificate (or sent
// none was asked for); one side speaks TLS and the other plain HTTP. The
// call is not retried. Cause says which, in words.
type TLSError struct {
	URL   string
	Cause string
	Err   error
}

func (e *TLSError) Error() string {
	return fmt.Sprintf("fence: TLS with the server at %s failed: %s", e.URL, e.Cause)
}

// Unwrap returns the transport's error.
func (e *TLSError) Unwrap() error { return e.Err }

// plaintextToTLS is what a Fence server (and any Go server) answers a
// plain HTTP/1.1 request sent to its TLS port; the server's GOAWAY to
// plain HTTP/2 carries server.PlaintextToTLS.
const (
	goPlaintextReply = "Client sent an HTTP request to an HTTPS server"
	plaintextGoAway  = "plain HTTP sent to a TLS port"
)

// TLSFailure returns the *TLSError that err, an error of a call to the
// server at url, is (a handshake no retry can fix: see TLSError), or nil.
// The client's own calls already fail with it; it is for the callers of
// the generated Connect clients (the CLI's admin commands).
func TLSFailure(url string, err error) *TLSError {
	var te *TLSError
	if errors.As(err, &te) {
		return te
	}
	return tlsFailure(url, err)
}

// issuedBy is " (CN=x, issued by CN=y)" naming the certificate c and its
// issuer, "" without one.
func issuedBy(c *x509.Certificate) string {
	if c == nil {
		return ""
	}
	return fmt.Sprintf(" (%q, issued by %q)", c.Subject.String(), c.Issuer.String())
}

// tlsFailure returns the *TLSError err is, or nil: the handshake's own
// errors and the server's answers to plain HTTP on its TLS port.
func tlsFailure(url string, err error) *TLSError {
	if err == nil {
		return nil
	}
	cause := ""
	var verify *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var host x509.HostnameError
	var header tls.RecordHeaderError
	var op *net.OpError
	switch {
	case errors.As(err, &host):
		cause = "the server's certificate does not name the host: " + host.Error()
	case errors.As(err, &unknownCA):
		cause = "the server's certificate" + issuedBy(unknownCA.Cert) + " is not signed by a trusted CA: give the file of the CA that signed it (the CLI's --cacert FILE or FENCE_CACERT; in Go tls.Config.RootCAs)"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		cause = "the server's certificate has expired or is not valid yet: " + invalid.Error()
	case errors.As(err, &invalid):
		cause = "the server's certificate is not valid: " + invalid.Error()
	case errors.As(err, &verify):
		cause = "the server's certificate was refused: " + verify.Err.Error()
	case errors.As(err, &header), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		cause = "the server does not speak TLS (use http://, or serve TLS with --cert-file)"
	case errors.As(err, &op) && op.Op == "remote error":
		cause = "the server refused the TLS handshake (" + op.Err.Error() + ")"
		if strings.Contains(op.Err.Error(), "certificate") {
			cause += ": the server checks client certificates against its --trusted-ca-file (and requires one with --client-cert-auth): give a certificate signed by that CA (--cert and --key, FENCE_CERT and FENCE_KEY, tls.Config.Certificates)"
		}
	case strings.Contains(err.Error(), goPlaintextReply), strings.Contains(err.Error(), plaintextGoAway):
		cause = "the server speaks TLS on this port: use an https:// URL (and --cacert)"
	default:
		return nil
	}
	return &TLSError{URL: url, Cause: cause, Err: err}
}
