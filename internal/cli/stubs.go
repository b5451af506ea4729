package cli

// Temporary command stubs; each moves to its own file when implemented.

import (
	"errors"

	"github.com/spf13/cobra"
)

func notYet(name string) *cobra.Command {
	return &cobra.Command{Use: name, RunE: func(*cobra.Command, []string) error { return errors.New(name + ": not implemented") }}
}

func (app *App) newSubmitCmd() *cobra.Command { return notYet("submit") }
func (app *App) newCancelCmd() *cobra.Command { return notYet("cancel") }
func (app *App) newResumeCmd() *cobra.Command { return notYet("resume") }
func (app *App) newCleanCmd() *cobra.Command  { return notYet("clean") }
