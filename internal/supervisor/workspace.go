package supervisor

import (
	"errors"

	"github.com/agentrun/agentrun/internal/workspace"
)

// configIdentity reads the author from the user's repository.
var configIdentity = workspace.ConfigIdentity

func isNoChanges(err error) bool { return errors.Is(err, workspace.ErrNoChanges) }
