//go:build !unix

package main

// restrictUmask: no umask where the OS has none. Fence is built for unix.
func restrictUmask() {}
