package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
)

// answer is one in-process API answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// bodyWriter keeps an answer in memory.
type bodyWriter struct {
	h      http.Header
	status int
	b      bytes.Buffer
}

func (b *bodyWriter) Header() http.Header { return b.h }

func (b *bodyWriter) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}

func (b *bodyWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.b.Write(p)
}

// call makes one request to the API in process.
func (u *UI) call(ctx context.Context, method, path, contentType string, body io.Reader) answer {
	req, err := http.NewRequestWithContext(ctx, method, path, body)
	if err != nil {
		return answer{status: http.StatusInternalServerError, body: errorJSON("internal", err.Error())}
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	w := &bodyWriter{h: http.Header{}}
	u.o.API.ServeHTTP(w, req)
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return answer{status: w.status, header: w.h, body: w.b.Bytes()}
}

// get calls GET path and decodes a 200 answer into v; false: an error
// answer (see problem).
func (u *UI) get(ctx context.Context, path string, v any) (answer, bool) {
	a := u.call(ctx, http.MethodGet, path, "", nil)
	return a, a.decode(v)
}

// postJSON posts v as JSON.
func (u *UI) postJSON(ctx context.Context, path string, v any) answer {
	b, _ := json.Marshal(v)
	return u.call(ctx, http.MethodPost, path, "application/json", bytes.NewReader(b))
}

func (a answer) decode(v any) bool {
	if a.status/100 != 2 {
		return false
	}
	return json.Unmarshal(a.body, v) == nil
}

// apiError is a catalog error as the API answers it.
type apiError struct {
	Code  string `json:"code"`
	What  string `json:"error"`
	Cause string `json:"cause"`
	Fix   string `json:"fix"`
	Doc   string `json:"doc"`
}

func errorJSON(code, what string) []byte {
	b, _ := json.Marshal(map[string]apiError{"error": {Code: code, What: what}})
	return b
}

// problem is the answer's catalog error.
func (a answer) problem() problem {
	var d struct {
		Error *apiError `json:"error"`
	}
	if json.Unmarshal(a.body, &d) != nil || d.Error == nil {
		return problem{Status: a.status, What: http.StatusText(a.status)}
	}
	e := d.Error
	return problem{Status: a.status, Code: e.Code, What: e.What, Cause: e.Cause, Fix: e.Fix, Doc: e.Doc}
}

// The documents below are the parts of the API's (docs/json) that the
// pages show.

type usageDoc struct {
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	CachedTokens     int64   `json:"cached_tokens"`
	Turns            int64   `json:"turns"`
	Requests         int64   `json:"requests"`
	CostUSD          float64 `json:"cost_usd"`
}

type verdictDoc struct {
	Value string `json:"value"`
	Note  string `json:"note"`
	By    string `json:"by"`
	At    string `json:"at"`
}

// listDoc is list.schema.json.
type listDoc struct {
	Runs []struct {
		ID        string      `json:"id"`
		Status    string      `json:"status"`
		Reason    string      `json:"reason"`
		CreatedAt string      `json:"created_at"`
		Repo      string      `json:"repo"`
		Agent     string      `json:"agent"`
		Attempts  int         `json:"attempts"`
		Verdict   *verdictDoc `json:"verdict"`
		Task      string      `json:"task"`
		Usage     *usageDoc   `json:"usage"`
	} `json:"runs"`
}

type checkResult struct {
	Name     string `json:"name"`
	ExitCode int    `json:"exit_code"`
	Passed   bool   `json:"passed"`
	TimedOut bool   `json:"timed_out"`
	Duration string `json:"duration"`
}

// statusDoc is status.schema.json.
type statusDoc struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	Reason     string `json:"reason"`
	Message    string `json:"message"`
	Task       string `json:"task"`
	Repo       string `json:"repo"`
	BaseRef    string `json:"base_ref"`
	BaseCommit string `json:"base_commit"`
	Subdir     string `json:"subdir"`
	Branch     string `json:"branch"`
	Commit     string `json:"commit"`
	CreatedAt  string `json:"created_at"`
	StartedAt  string `json:"started_at"`
	FinishedAt string `json:"finished_at"`
	Agent      struct {
		Name    string `json:"name"`
		Command string `json:"command"`
		Model   string `json:"model"`
	} `json:"agent"`
	Checks []struct {
		Name    string `json:"name"`
		Command string `json:"command"`
	} `json:"checks"`
	MaxAttempts int `json:"max_attempts"`
	Sandbox     struct {
		Backend string `json:"backend"`
		Network string `json:"network"`
	} `json:"sandbox"`
	Attempts []struct {
		N          int           `json:"n"`
		StartedAt  string        `json:"started_at"`
		FinishedAt string        `json:"finished_at"`
		ExitCode   *int          `json:"exit_code"`
		Outcome    string        `json:"outcome"`
		Message    string        `json:"message"`
		Checks     []checkResult `json:"checks"`
		Usage      *usageDoc     `json:"usage"`
	} `json:"attempts"`
	Result *struct {
		FilesChanged int    `json:"files_changed"`
		Insertions   int    `json:"insertions"`
		Deletions    int    `json:"deletions"`
		Diffstat     string `json:"diffstat"`
	} `json:"result"`
	Warnings        []string    `json:"warnings"`
	CancelRequested bool        `json:"cancel_requested"`
	Usage           *usageDoc   `json:"usage"`
	Verdict         *verdictDoc `json:"verdict"`
}

// logsDoc is logs.schema.json.
type logsDoc struct {
	Logs []struct {
		Attempt int    `json:"attempt"`
		Kind    string `json:"kind"`
		Name    string `json:"name"`
		Text    string `json:"text"`
	} `json:"logs"`
}

// egressDoc is egress.schema.json.
type egressDoc struct {
	Network string   `json:"network"`
	Allow   []string `json:"allow"`
	Allowed []struct {
		Host      string `json:"host"`
		Port      int    `json:"port"`
		Count     int    `json:"count"`
		BytesUp   int64  `json:"bytes_up"`
		BytesDown int64  `json:"bytes_down"`
		Via       string `json:"via"` // this machine's proxy, if any
	} `json:"allowed"`
	Denied []struct {
		Host  string `json:"host"`
		Port  int    `json:"port"`
		Count int    `json:"count"`
		Why   string `json:"why"`
		Flag  string `json:"flag"`
	} `json:"denied"`
}

// resultDoc is what the pages show of result.schema.json: why a failed
// run failed, where agentrun can tell.
type resultDoc struct {
	Model *struct {
		Hint string `json:"hint"`
	} `json:"model"`
	Network *struct {
		Hint string `json:"hint"`
	} `json:"network"`
}

// hints are the result's hints, the model's first (as result prints
// them).
func (d resultDoc) hints() []string {
	var out []string
	if d.Model != nil && d.Model.Hint != "" {
		out = append(out, d.Model.Hint)
	}
	if d.Network != nil && d.Network.Hint != "" {
		out = append(out, d.Network.Hint)
	}
	return out
}

// diffDoc is diff.schema.json.
type diffDoc struct {
	Patch string `json:"patch"`
}

// submittedDoc is common.schema.json's submitted.
type submittedDoc struct {
	ID string `json:"id"`
}
