// Command fence is the Fence server and its command-line client.
//
//	fence serve [--listen ADDR] [--data-dir DIR] [--max-ttl D] [--log-store wal|bolt]
//	fence acquire NAME --ttl D [--owner S] [--wait D] [--request-id S] [--lock-delay D]
//	fence renew NAME --token N [--ttl D]
//	fence release NAME --token N
//	fence locks [PREFIX]
//	fence write RESOURCE --token N --value V [--op-id S]
//	fence add RESOURCE --token N --delta N [--op-id S]
//	fence read RESOURCE
//	fence run NAME --ttl D [--wait D] [--grace D] -- CMD ARGS...
//	fence lab [--unit D]
//	fence guard max-token ...
//	fence version
//
// Global flags, before or after the subcommand: --server URL (env
// FENCE_SERVER, default http://127.0.0.1:7420), --json (print one JSON
// object), --timeout D (per command, default 10s, added to any --wait).
//
// Exit codes: 0 ok, 1 error, 2 usage or invalid argument, 3 busy (held, or
// the wait ran out), 4 refused (STALE_TOKEN, NOT_HOLDER, LEASE_EXPIRED,
// UNKNOWN_TOKEN, OP_CONFLICT).
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }
