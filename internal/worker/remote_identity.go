package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/client"
	"github.com/agentrun/agentrun/internal/server"
)

// Identity is an enrolled host's identity, kept in its data directory
// (host.json, mode 0600): the server it joined, its id and its credential.
type Identity struct {
	Server     string `json:"server"`
	HostID     string `json:"host_id"`
	Credential string `json:"credential"`
}

// identityFile is where data keeps the host's identity.
func identityFile(data string) string { return filepath.Join(data, "host.json") }

// LoadIdentity reads the identity kept in data (nil: not enrolled yet).
func LoadIdentity(data string) (*Identity, error) {
	b, err := os.ReadFile(identityFile(data))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var id Identity
	if err == nil {
		err = json.Unmarshal(b, &id)
	}
	if err == nil && (id.HostID == "" || id.Credential == "" || id.Server == "") {
		err = errors.New("it lacks the server, the host id or the credential")
	}
	if err != nil {
		return nil, catalog.Home.Wrap(err, "%s: %v", identityFile(data), err).
			WithFix("remove it and enrol the host again with a new token")
	}
	return &id, nil
}

// Enrol exchanges the one-time token for an identity at serverURL and
// keeps it in data.
func Enrol(ctx context.Context, data, serverURL, token string, in server.EnrolRequest) (*Identity, error) {
	c, err := client.New(serverURL, "")
	if err != nil {
		return nil, err
	}
	in.Token = token
	b, err := c.Post(ctx, "/v1/hosts/enrol", in)
	if err != nil {
		return nil, err
	}
	var out server.Enrolled
	if err := json.Unmarshal(b, &out); err != nil || out.HostID == "" || out.Credential == "" {
		return nil, catalog.ServerProtocol.New("the enrolment's answer holds no identity")
	}
	id := &Identity{Server: c.URL(), HostID: out.HostID, Credential: out.Credential}
	b, _ = json.MarshalIndent(id, "", "  ")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, catalog.Home.Wrap(err, "%s: %v", data, err)
	}
	tmp := identityFile(data) + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return nil, catalog.Home.Wrap(err, "%s: %v", tmp, err)
	}
	if err := os.Rename(tmp, identityFile(data)); err != nil {
		return nil, catalog.Home.Wrap(err, "%s: %v", identityFile(data), err)
	}
	return id, nil
}

// String names the identity for messages.
func (id *Identity) String() string { return fmt.Sprintf("host %s of %s", id.HostID, id.Server) }
