package cli

// Temporary command stubs; each moves to its own file when implemented.

import (
	"errors"

	"github.com/spf13/cobra"
)

func notYet(name string) *cobra.Command {
	return &cobra.Command{Use: name, RunE: func(*cobra.Command, []string) error { return errors.New(name + ": not implemented") }}
}
