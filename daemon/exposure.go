package daemon

import (
	"errors"
	"net"
)

// ErrInsecureListen is what an *InsecureListenError is (errors.Is).
var ErrInsecureListen = errors.New("refusing to listen on a non-loopback address without TLS")

// InsecureListenError: Run (and New, for the raft port) refuses to listen
// where other machines can reach a port that speaks no TLS, unless
// Config.InsecureListen says so.
type InsecureListenError struct {
	// Port is "client" or "raft"; Flag the flag that set its address
	// (--listen, --raft-addr); Addr the address it gave.
	Port, Flag, Addr string
}

func (e *InsecureListenError) Error() string {
	fix := "serve TLS (--cert-file, --key-file; with --trusted-ca-file and --client-cert-auth clients must present a certificate)"
	if e.Port == "raft" {
		fix = "make the raft port mutual TLS (--peer-cert-file, --peer-key-file, --peer-trusted-ca-file)"
	}
	return "refusing to listen on " + e.Addr + " (" + e.Flag + ", the " + e.Port + " port): it is not a loopback address and the port speaks no TLS, " +
		"so anyone who can reach it can take and release locks" + map[bool]string{true: ", join the cluster and vote", false: ""}[e.Port == "raft"] +
		"; " + fix + ", listen on a loopback address, or pass --insecure-listen to listen anyway on a network you trust"
}

func (e *InsecureListenError) Is(target error) bool { return target == ErrInsecureListen }

// checkExposure refuses a port given as addr and bound at bound that is
// not on loopback and speaks no TLS, unless cfg.InsecureListen; with it,
// the raft port's exposure is logged as an error (Run logs the client
// port's).
func checkExposure(cfg Config, port, flag, addr string, bound net.Addr, tls bool) error {
	if tls || loopback(bound) {
		return nil
	}
	if !cfg.InsecureListen {
		return &InsecureListenError{Port: port, Flag: flag, Addr: addr}
	}
	if port == "raft" {
		cfg.Logger.Error("--insecure-listen: the raft port listens on a non-loopback address without peer TLS: "+
			"anyone who can reach it can join the cluster, vote, and call the API as a peer; "+
			"make it mutual TLS (--peer-cert-file, --peer-key-file, --peer-trusted-ca-file) or keep it on a trusted network",
			"raft_addr", addr, "bound", bound.String())
	}
	return nil
}
