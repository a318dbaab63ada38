// Package proof is the guards' one check of a signed token (G9): given a
// key source (a fixed *fence.KeySet or a function returning the current
// one) and a lock mapping, it tells a token Fence granted for the lock that
// protects a resource from a forged, tampered, foreign or mis-scoped one,
// before the guard compares the number. Every guard (the SQL engine, Redis,
// httpguard's middleware and RoundTripper's users) calls Verifier.Verify
// first and touches its store only if it returns nil. It imports only the
// root package.
package proof
