// Package guardtest is the conformance suite the SQL guards share: every
// guard store (PostgreSQL, SQLite, MySQL/MariaDB) runs the same tests through a small
// Store adapter written in its own _test.go file, against the real database.
package guardtest
