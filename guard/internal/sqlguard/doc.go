// Package sqlguard holds what the SQL guards (guard/postgres,
// guard/sqlite and guard/mysql) share: input validation, identifier checks, the payload hash
// of idempotent operations, the retention rule for op records and the errors
// of the column pattern. It imports only the root package.
package sqlguard
