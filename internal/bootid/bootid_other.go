//go:build !linux && !darwin

package bootid

func read() string { return "" }
