//go:build !linux

package docker

import (
	"fmt"
	"os"
)

// Main is the "__docker" entry point. It runs inside a Linux container
// only: a binary of another system cannot be the container's entry point.
func Main(args []string) int {
	fmt.Fprintln(os.Stderr, "agentrun "+EntryName+": runs inside a Linux container only")
	return 70
}
