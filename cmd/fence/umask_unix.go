//go:build unix

package main

import "syscall"

// restrictUmask makes every file and directory `fence serve` creates
// private to its user (umask 077): the data dir's WAL, snapshots and
// metadata hold the cluster's signing key seeds and auth state, and some
// are written by libraries (raft's snapshot store) with their own modes.
// The explicit modes of node and raftstore (0700 dirs, 0600 files) hold
// without it; this covers the rest.
func restrictUmask() { syscall.Umask(0o077) }
