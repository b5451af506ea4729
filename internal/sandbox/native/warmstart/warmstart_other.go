//go:build !linux

package warmstart

// Take returns nil: only Linux has the native sandbox.
func Take(exe string) *Init { return nil }

// Drop does nothing: only Linux has the native sandbox.
func Drop() {}
