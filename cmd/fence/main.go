// Command fence is the Fence server and its command-line client.
//
//	fence serve [--listen ADDR] [--data-dir DIR] [--max-ttl D] [--log-store wal] ...
//	fence serve ... --node-id ID --raft-addr HOST:PORT [--raft-advertise HOST:PORT]
//	            (--bootstrap | --join URL[,URL] | --peers ID=HOST:PORT,...)
//	fence serve ... [--log-format text|json] [--log-level debug|info|warn|error]
//	            (every serve flag also from FENCE_<FLAG>: FENCE_MAX_TTL=1h; flags win)
//	fence acquire NAME --ttl D [--owner S] [--wait D] [--request-id S] [--lock-delay D]
//	fence renew NAME --token N [--ttl D]
//	fence release NAME --token N
//	fence hold NAME [--ttl D] [--wait D] [--owner S]        (waits up to 24h by default; --wait 0: try once)
//	fence run NAME... --ttl D [--wait D] [--grace D] -- CMD ARGS...   (likewise)
//	fence locks [PREFIX] [--page-size N]
//	fence write RESOURCE --token N --value V [--op-id S]
//	fence add RESOURCE --token N --delta N [--op-id S]
//	fence delete RESOURCE --token N [--op-id S]
//	fence read RESOURCE
//	fence lab [--unit D] [--embedded]
//	fence members [--wait D] [add ID RAFTADDR | remove ID | transfer [ID]]
//	fence status [--wait D]
//	fence restore FILE --data-dir DIR [--floor N]... [--floor-from DSN]... [--node-id ID] [--raft-addr HOST:PORT]
//	fence guard max-token ...
//	fence version (or fence --version)
//
// Global flags, before or after the subcommand: --server URL (env
// FENCE_SERVER, default http://127.0.0.1:7420; HOST:PORT is taken as
// http://HOST:PORT, anything else not a URL is a usage error), --json (print one JSON
// object, with the field names of the API's JSON; tokens as numbers),
// --timeout D (per command, default 10s, added to any --wait), -h/--help
// (usage on stdout, exit 0). Durations need a unit (30s, 500ms). A server
// that refuses the connection fails the command at once, with a hint.
//
// Exit codes: 0 ok, 1 error (server unreachable, ...), 2 usage or invalid
// argument, 3 busy (held, or the wait ran out), 4 refused (STALE_TOKEN,
// NOT_HOLDER, LEASE_EXPIRED, UNKNOWN_TOKEN, OP_CONFLICT), 5 resource
// exhausted (a server limit: waiters, resources, remembered ids), 6 no
// leader known (fence status and fence members: the answer is printed, but
// no node that answered knows a leader).
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }
