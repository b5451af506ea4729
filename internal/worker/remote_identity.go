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
	"github.com/agentrun/agentrun/internal/seal"
	"github.com/agentrun/agentrun/internal/server"
)

// Identity is an enrolled host's identity, kept in its data directory
// (host.json, mode 0600): the server it joined, its id, its credential,
// and the private key the server seals the run's values to
// (internal/seal). A host enrolled before sealing keys has none until
// RegisterSealKey makes one.
type Identity struct {
	Server     string `json:"server"`
	HostID     string `json:"host_id"`
	Credential string `json:"credential"`
	SealKey    []byte `json:"seal_key,omitempty"`
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
	key, err := seal.NewKey()
	if err != nil {
		return nil, err
	}
	priv, err := key.Bytes()
	if err != nil {
		return nil, err
	}
	in.Token, in.SealKey = token, key.Public()
	b, err := c.Post(ctx, "/v1/hosts/enrol", in)
	if err != nil {
		return nil, err
	}
	var out server.Enrolled
	if err := json.Unmarshal(b, &out); err != nil || out.HostID == "" || out.Credential == "" {
		return nil, catalog.ServerProtocol.New("the enrolment's answer holds no identity")
	}
	id := &Identity{Server: c.URL(), HostID: out.HostID, Credential: out.Credential, SealKey: priv}
	if err := id.save(data); err != nil {
		return nil, err
	}
	return id, nil
}

// save keeps the identity in data: a temporary file, synced, renamed.
func (id *Identity) save(data string) error {
	b, _ := json.MarshalIndent(id, "", "  ")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return catalog.Home.Wrap(err, "%s: %v", data, err)
	}
	tmp := identityFile(data) + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err == nil {
		_, err = f.Write(append(b, '\n'))
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return catalog.Home.Wrap(err, "%s: %v", tmp, err)
	}
	if err := os.Rename(tmp, identityFile(data)); err != nil {
		return catalog.Home.Wrap(err, "%s: %v", identityFile(data), err)
	}
	return nil
}

// Key is the host's private sealing key.
func (id *Identity) Key() (*seal.Key, error) {
	if len(id.SealKey) == 0 {
		return nil, errors.New("the host has no sealing key yet")
	}
	return seal.ParseKey(id.SealKey)
}

// RegisterSealKey makes sure the server holds this host's sealing key: a
// host enrolled before sealing keys makes one and keeps it in data first
// (a registration whose answer is lost is then made again with the same
// key), then registers it with its credential; a host that has one sends
// it again, which the server accepts only if it is the key it holds.
func (id *Identity) RegisterSealKey(ctx context.Context, data string, c *client.Client) error {
	if len(id.SealKey) == 0 {
		key, err := seal.NewKey()
		if err != nil {
			return err
		}
		if id.SealKey, err = key.Bytes(); err != nil {
			return err
		}
		if err := id.save(data); err != nil {
			return err
		}
	}
	key, err := id.Key()
	if err != nil {
		return catalog.Home.Wrap(err, "%s: %v", identityFile(data), err).
			WithFix("remove it and enrol the host again with a new token")
	}
	b, err := c.Post(ctx, "/v1/hosts/seal-key", server.SealKeyRequest{SealKey: key.Public()})
	if err != nil {
		return err
	}
	var out server.SealKeyAnswer
	if err := json.Unmarshal(b, &out); err != nil || out.SealKey != seal.Fingerprint(key.Public()) {
		return catalog.ServerProtocol.New("the server's answer names another sealing key than this host's")
	}
	return nil
}

// String names the identity for messages.
func (id *Identity) String() string { return fmt.Sprintf("host %s of %s", id.HostID, id.Server) }
