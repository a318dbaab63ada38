// Package sqlguard is the engine of the SQL guards (guard/postgres,
// guard/mysql, guard/sqlite): one implementation of Check, Do, CheckOp and
// SaveOp, Prune, MaxToken, Migrate and the column pattern's CheckRows,
// written once over a Dialect (a database's statements, quoting, bind
// values and error classification) and a Querier (exec and query-row over a
// transaction or a connection). The guards are typed facades: each declares
// its Dialect and adapts its driver's types to Querier and Tx. The package
// also holds input validation, identifier checks, the payload hash of
// idempotent operations, the retention rule for op records and the errors
// of the column pattern. It imports only the root package and the standard
// library.
package sqlguard
