// Package clusterapi is the vocabulary of a Fence cluster without the raft
// node behind it: what a node reports of itself and of the members
// (NodeStatus, MemberList), how it calls another node's membership API
// (Peer, PeerHTTPClient) and forwards to its leader (RemoteFunc,
// ForwardedHeader), and the refusals they share. Package cluster
// implements it over a node; package server serves it on the wire and
// reaches other nodes with it, without linking raft.
package clusterapi
