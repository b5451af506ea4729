package cli

// audit.go: agentrun audit list, export and verify (a team server's audit
// trail, internal/audit), and agentrun server audit-key.

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/audit"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/server"
)

// auditExitStatus is the audit commands' long help's end.
const auditExitStatus = `
EXIT STATUS
  0    success (verify: the trail is whole)
  2    usage error, no key pinned, an export that cannot be read, a
       server that cannot be reached
  4    verify: the trail was altered (audit_tampered names the entry)
  70   internal error`

// isAuditCmd reports the audit commands: they go to a team server
// (verify --file excepted), as the run commands do.
func isAuditCmd(c *cobra.Command) bool {
	p := c.Parent()
	return p != nil && p.Name() == "audit" && p.Parent() == c.Root()
}

// needServer is the error of an audit command without a server.
func (app *App) needServer(what string) error {
	if app.remote != nil {
		return nil
	}
	return catalog.Usage.New("agentrun audit %s reads a team server's audit trail, and no server is named", what).
		WithFix("name the server with --server URL (or AGENTRUN_SERVER)")
}

func (app *App) newAuditCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "audit list|export|verify",
		Short: "Read and verify a team server's audit trail",
		Long: `Read and verify a team server's audit trail (--server URL, or
AGENTRUN_SERVER): every state-changing request (submit, cancel, resume,
verdict) and every run event (state changes, attempts, checks, export, ...)
as a hash-chained log, sealed by checkpoints that the server signs with its
ed25519 key.

  agentrun audit list [--after SEQ] [--run ID] [--limit N]
  agentrun audit export > trail.jsonl
  agentrun audit verify --key audit.pub [--file trail.jsonl]

Pin the server's key once: on the server, 'agentrun server audit-key >
audit.pub' (or GET /v1/audit/key, its fingerprint compared out of band),
and give that file to every verify. verify never trusts the key the
server serves at the time it checks.
` + auditExitStatus,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	c.AddCommand(app.newAuditListCmd(), app.newAuditExportCmd(), app.newAuditVerifyCmd())
	return c
}

type auditListOptions struct {
	After int64
	Run   string
	Limit int
}

func (o *auditListOptions) Validate() error {
	if o.After < 0 || o.Limit < 0 {
		return catalog.Usage.New("--after %d, --limit %d: want whole numbers", o.After, o.Limit)
	}
	return nil
}

func (app *App) newAuditListCmd() *cobra.Command {
	o := &auditListOptions{}
	c := &cobra.Command{
		Use:   "list [--after SEQ] [--run ID] [--limit N]",
		Short: "List audit entries, oldest first",
		Long: `List the audit trail's entries with a seq after --after (default: from the
first), of one run with --run ID (its full id), at most --limit (default
1000, at most 10000). --json prints the server's document: {"entries": [...]},
each entry with seq, time, actor, action, run, payload, prev_hash and hash.
` + auditExitStatus,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			if err := app.needServer("list"); err != nil {
				return err
			}
			return app.runAuditList(c.Context(), o)
		},
	}
	f := c.Flags()
	f.Int64Var(&o.After, "after", 0, "entries after this `SEQ`")
	f.StringVar(&o.Run, "run", "", "only the entries of run `ID` (its full id)")
	f.IntVar(&o.Limit, "limit", 0, "at most `N` entries (default 1000)")
	return c
}

func (app *App) runAuditList(ctx context.Context, o *auditListOptions) error {
	q := url.Values{}
	if o.After > 0 {
		q.Set("after", strconv.FormatInt(o.After, 10))
	}
	if o.Run != "" {
		q.Set("run", o.Run)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	doc, err := app.remote.Get(ctx, "/v1/audit", q)
	return answer(app, doc, err, &server.AuditList{}, func(l *server.AuditList) error {
		if len(l.Entries) == 0 {
			fmt.Fprintf(app.Stdout, "no audit entries after %d on %s\n", o.After, app.remote.URL())
			return nil
		}
		now := time.Now()
		t := table{header: []string{"SEQ", "AGE", "ACTOR", "ACTION", "RUN", "HASH"}, colour: app.colour()}
		for _, e := range l.Entries {
			when, _ := time.Parse(audit.TimeFormat, e.Time)
			run := e.Run
			if run == "" {
				run = "-"
			}
			t.add(strconv.FormatInt(e.Seq, 10), ago(now, when), e.Actor, e.Action, run, short(e.Hash))
		}
		return t.write(app.Stdout)
	})
}

func short(hash string) string { return hash[:min(len(hash), 12)] }

func (app *App) newAuditExportCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "export",
		Short: "Write the whole audit trail as JSON lines",
		Long: `Write the team server's whole audit trail on stdout as JSON lines: each line
is {"entry": {...}} or {"checkpoint": {...}}, in seq order, each checkpoint
after the entry it seals (docs/json/audit-export.schema.json). Keep an
export: 'agentrun audit verify --file' checks it later, and an export taken
earlier shows what a later trail lost. (--json changes nothing: the output
is JSON already.)
` + auditExitStatus,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := app.needServer("export"); err != nil {
				return err
			}
			return app.remote.Download(c.Context(), "/v1/audit/export", app.Stdout)
		},
	}
}

type auditVerifyOptions struct {
	KeyFiles []string
	KeyHex   []string
	File     string
	// keys are the pinned keys (Validate reads them).
	keys []ed25519.PublicKey
}

// Validate reads the pinned keys: the files, the hex keys, and
// AGENTRUN_AUDIT_KEY (hex, several separated by commas).
func (o *auditVerifyOptions) Validate(getenv func(string) string) error {
	texts := map[string]string{}
	for _, f := range o.KeyFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return catalog.AuditKey.Wrap(err, "--key %s: %v", f, err)
		}
		texts["--key "+f] = string(b)
	}
	for _, k := range o.KeyHex {
		texts["--key-hex "+k] = k
	}
	if len(texts) == 0 {
		for k := range strings.SplitSeq(getenv("AGENTRUN_AUDIT_KEY"), ",") {
			if k = strings.TrimSpace(k); k != "" {
				texts["AGENTRUN_AUDIT_KEY "+k] = k
			}
		}
	}
	if len(texts) == 0 {
		return catalog.AuditKey.New("verify checks checkpoints only with a key pinned beforehand, and none was given")
	}
	for from, text := range texts {
		k, err := audit.ParsePublicKey(text)
		if err != nil {
			return catalog.AuditKey.Wrap(err, "%s: %v", from, err)
		}
		o.keys = append(o.keys, k)
	}
	return nil
}

// auditVerifyOutput is verify's --json document.
type auditVerifyOutput struct {
	Source string `json:"source"`
	audit.Report
	// Error is the catalog error of a trail found altered (exit 4).
	Error *catalog.Error `json:"error,omitempty"`
}

func (app *App) newAuditVerifyCmd() *cobra.Command {
	o := &auditVerifyOptions{}
	c := &cobra.Command{
		Use:   "verify [--key FILE | --key-hex KEY] [--file EXPORT]",
		Short: "Verify the audit trail: every hash and every checkpoint's signature",
		Long: `Verify a team server's audit trail, read from the server (GET
/v1/audit/export) or from a file 'agentrun audit export' wrote (--file):
every entry's hash is recomputed, every link to the entry before followed,
every checkpoint's signature checked with the pinned key and its hash
compared with the entry it seals. The first bad entry is named, with what
happened to it: edited, removed, inserted, reordered, rewritten (the chain
recomputed up to a checkpoint), truncated (the log ends before a
checkpoint), or bad_checkpoint (a signature the pinned key did not make).

The key is pinned by the user, never taken from the server being checked:
--key FILE (what 'agentrun server audit-key' printed on the server, or a
PEM public key), --key-hex KEY, or AGENTRUN_AUDIT_KEY; each repeatable, for
servers with keys of their own on one database.

What no verify can see: entries after the last checkpoint can be cut off
or rewritten by whoever can write the database (the server signs a
checkpoint every --audit-every entries or --audit-interval, and at
shutdown; verify says how many entries are not sealed yet), and a
checkpoint removed together with the entries after it. An export kept
from earlier bounds both: verify it, and compare its head with the
server's.
` + auditExitStatus,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := o.Validate(app.Getenv); err != nil {
				return err
			}
			return app.runAuditVerify(c.Context(), o)
		},
	}
	f := c.Flags()
	f.StringArrayVar(&o.KeyFiles, "key", nil, "the pinned public key is in this `FILE` (repeatable)")
	f.StringArrayVar(&o.KeyHex, "key-hex", nil, "the pinned public `KEY`, 64 hex digits (repeatable)")
	f.StringVar(&o.File, "file", "", "verify this `EXPORT` (from agentrun audit export) instead of the server's trail")
	return c
}

func (app *App) runAuditVerify(ctx context.Context, o *auditVerifyOptions) error {
	var es []audit.Entry
	var cps []audit.Checkpoint
	var source string
	var err error
	if o.File != "" {
		source = o.File
		f, ferr := os.Open(o.File)
		if ferr != nil {
			return catalog.AuditFile.Wrap(ferr, "%v", ferr)
		}
		defer f.Close()
		if es, cps, err = audit.ReadExport(f); err != nil {
			return catalog.AuditFile.Wrap(err, "%s: %v", o.File, err)
		}
	} else {
		if err := app.needServer("verify"); err != nil {
			return err
		}
		source = app.remote.URL()
		if es, cps, err = app.remoteExport(ctx); err != nil {
			return err
		}
	}
	out := auditVerifyOutput{Source: source, Report: audit.Verify(es, cps, o.keys)}
	if p := out.Problem; p != nil {
		out.Error = catalog.AuditTampered.New("%s: entry %d %s: %s", source, p.Seq, p.Kind, p.Detail)
	}
	if app.JSON {
		if err := writeJSON(app.Stdout, out); err != nil {
			return err
		}
		if out.Error != nil {
			return &reported{exit: catalog.ExitTampered}
		}
		return nil
	}
	if out.Error != nil {
		return out.Error
	}
	return app.printVerify(out)
}

// remoteExport reads the server's export.
func (app *App) remoteExport(ctx context.Context) ([]audit.Entry, []audit.Checkpoint, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(app.remote.Download(ctx, "/v1/audit/export", pw)) }()
	defer pr.Close()
	es, cps, err := audit.ReadExport(pr)
	if err != nil {
		if _, ok := catalog.As(err); ok {
			return nil, nil, err
		}
		return nil, nil, catalog.ServerProtocol.Wrap(err, "the server's audit export: %v", err)
	}
	return es, cps, nil
}

func (app *App) printVerify(out auditVerifyOutput) error {
	col := app.colour()
	fmt.Fprintf(app.Stdout, "%s  %s: %d entries, head %d (%s)\n", paint(col, sgrGreen, "ok"), out.Source, out.Entries, out.Head, short(out.HeadHash))
	cps := "checkpoints"
	if out.Checkpoints == 1 {
		cps = "checkpoint"
	}
	fmt.Fprintf(app.Stdout, "    %d %s verified with %s", out.Checkpoints, cps, strings.Join(out.Keys, ", "))
	if out.Sealed > 0 {
		fmt.Fprintf(app.Stdout, "; the last seals entry %d", out.Sealed)
	}
	fmt.Fprintln(app.Stdout)
	if out.Unsealed > 0 {
		fmt.Fprintf(app.Stdout, "    %s entries %d to %d (%d) are not sealed by a checkpoint yet: they could be cut off or rewritten unseen\n",
			paint(col, sgrYellow, "note"), out.Sealed+1, out.Head, out.Unsealed)
	}
	return nil
}

type auditKeyOptions struct{ Data string }

func (app *App) newServerAuditKeyCmd() *cobra.Command {
	o := &auditKeyOptions{}
	c := &cobra.Command{
		Use:   "audit-key [--data DIR]",
		Short: "Print the public key that signs the server's audit checkpoints",
		Long: `Print the public key (ed25519, 64 hex digits, then its fingerprint) that
signs the audit checkpoints of the server whose data directory is --data
DIR (made on the server's first start, DIR/audit.key, readable by its
owner only; made here if missing). Pin it where you verify:

  agentrun server audit-key > audit.pub
  agentrun audit verify --key audit.pub

The server serves the same key at GET /v1/audit/key; compare its
fingerprint with this one once, out of band, rather than trusting it.
--json prints {"algorithm", "public_key", "fingerprint"}.
` + exitStatus,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			data, err := app.serverData(&serverOptions{Data: o.Data})
			if err != nil {
				return err
			}
			key, err := audit.LoadOrCreateKey(data)
			if err != nil {
				return catalog.Home.Wrap(err, "the server's audit key: %v", err)
			}
			doc := server.NewAuditKey(key.Public())
			if app.JSON {
				return writeJSON(app.Stdout, doc)
			}
			_, err = fmt.Fprintf(app.Stdout, "%s  %s %s\n", doc.PublicKey, doc.Algorithm, doc.Fingerprint)
			return err
		},
	}
	c.Flags().StringVar(&o.Data, "data", "", "the server's data `DIR` (default: the data directory's server/)")
	return c
}
