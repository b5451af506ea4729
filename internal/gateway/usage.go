package gateway

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"io"
	"strings"
	"sync"
)

// Kind is what one request asks of the model API.
type Kind string

const (
	KindAnthropic Kind = "anthropic"        // /v1/messages
	KindChat      Kind = "openai-chat"      // /v1/chat/completions
	KindResponses Kind = "openai-responses" // /v1/responses
	KindGemini    Kind = "gemini"           // :generateContent, :streamGenerateContent
	KindOther     Kind = ""                 // model lists, token counts, anything else
)

// kindOf names the generation endpoint a request path is, by suffix.
func kindOf(method, path string) Kind {
	if method != "POST" {
		return KindOther
	}
	switch {
	case strings.HasSuffix(path, "/messages"):
		return KindAnthropic
	case strings.HasSuffix(path, "/chat/completions"):
		return KindChat
	case strings.HasSuffix(path, "/responses"):
		return KindResponses
	case strings.HasSuffix(path, ":generateContent"), strings.HasSuffix(path, ":streamGenerateContent"):
		return KindGemini
	}
	return KindOther
}

// Tokens is the usage of one response (or a sum of them).
type Tokens struct {
	// Input counts every prompt token, cached ones included.
	Input int64 `json:"input_tokens"`
	// Output counts generated tokens, reasoning included.
	Output int64 `json:"output_tokens"`
	// Cached are input tokens read from the provider's prompt cache.
	Cached int64 `json:"cached_tokens,omitempty"`
	// CacheWrite are input tokens written to the cache (Anthropic).
	CacheWrite int64 `json:"cache_write_tokens,omitempty"`
}

// meter reads usage out of one response as it passes. The fields are set
// as the protocol reports them: a later report of a field replaces an
// earlier one (streams report running totals).
type meter struct {
	kind  Kind
	model string
	// Raw fields, by the protocol's own meaning.
	in, out, cacheRead, cacheWrite int64
	seen                           bool
}

// tokens normalises the raw fields: Input includes cached tokens.
func (m *meter) tokens() Tokens {
	t := Tokens{Output: m.out, Cached: m.cacheRead, CacheWrite: m.cacheWrite}
	switch m.kind {
	case KindAnthropic:
		// Anthropic's input_tokens excludes cache reads and writes.
		t.Input = m.in + m.cacheRead + m.cacheWrite
	default:
		t.Input = m.in
	}
	return t
}

// usageEvent is what the meter reads of an object. The rest is skipped,
// not kept: a Responses event echoes the whole request (instructions,
// tools), tens of kB, and this is read as the stream passes.
type usageEvent struct {
	Type  string          `json:"type"`
	Model string          `json:"model"`
	Usage json.RawMessage `json:"usage"`
	// Message is Anthropic's message_start's message, Response a
	// Responses event's response: each holds the model and usage.
	Message  *usageEvent `json:"message"`
	Response *usageEvent `json:"response"`
	// Gemini's names.
	ModelVersion  string          `json:"modelVersion"`
	UsageMetadata json.RawMessage `json:"usageMetadata"`
}

// within is the model and usage of an event that holds them in inner,
// else of the event itself.
func (e *usageEvent) within(inner *usageEvent) (string, json.RawMessage) {
	usage := inner.Usage
	if len(usage) == 0 {
		usage = e.Usage
	}
	return cmp.Or(inner.Model, e.Model), usage
}

// object takes one JSON object: a whole response or one stream event.
func (m *meter) object(b []byte) {
	var e usageEvent
	// A field of another type is skipped and the rest still read (the
	// error names the first such field); bad JSON is not metered.
	if err := json.Unmarshal(b, &e); err != nil {
		if _, ok := err.(*json.UnmarshalTypeError); !ok {
			return
		}
	}
	model, usage := e.Model, e.Usage
	switch m.kind {
	case KindAnthropic:
		if e.Type == "message_start" {
			if e.Message == nil {
				return
			}
			model, usage = e.within(e.Message)
		}
		m.setModel(model)
		var u struct {
			In         *int64 `json:"input_tokens"`
			Out        *int64 `json:"output_tokens"`
			CacheRead  *int64 `json:"cache_read_input_tokens"`
			CacheWrite *int64 `json:"cache_creation_input_tokens"`
		}
		if json.Unmarshal(usage, &u) == nil {
			m.set(&m.in, u.In)
			m.set(&m.out, u.Out)
			m.set(&m.cacheRead, u.CacheRead)
			m.set(&m.cacheWrite, u.CacheWrite)
		}
	case KindChat:
		m.setModel(model)
		var u struct {
			In      *int64 `json:"prompt_tokens"`
			Out     *int64 `json:"completion_tokens"`
			Details struct {
				Cached *int64 `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		}
		if len(usage) > 0 && string(usage) != "null" && json.Unmarshal(usage, &u) == nil {
			m.set(&m.in, u.In)
			m.set(&m.out, u.Out)
			m.set(&m.cacheRead, u.Details.Cached)
		}
	case KindResponses:
		if strings.HasPrefix(e.Type, "response.") {
			if e.Response == nil {
				return
			}
			model, usage = e.within(e.Response)
		}
		m.setModel(model)
		var u struct {
			In      *int64 `json:"input_tokens"`
			Out     *int64 `json:"output_tokens"`
			Details struct {
				Cached *int64 `json:"cached_tokens"`
			} `json:"input_tokens_details"`
		}
		if len(usage) > 0 && string(usage) != "null" && json.Unmarshal(usage, &u) == nil {
			m.set(&m.in, u.In)
			m.set(&m.out, u.Out)
			m.set(&m.cacheRead, u.Details.Cached)
		}
	case KindGemini:
		m.setModel(e.ModelVersion)
		var u struct {
			In       *int64 `json:"promptTokenCount"`
			Out      *int64 `json:"candidatesTokenCount"`
			Thoughts *int64 `json:"thoughtsTokenCount"`
			Cached   *int64 `json:"cachedContentTokenCount"`
		}
		if raw := e.UsageMetadata; len(raw) > 0 && json.Unmarshal(raw, &u) == nil {
			m.set(&m.in, u.In)
			if u.Out != nil || u.Thoughts != nil {
				var out int64
				if u.Out != nil {
					out += *u.Out
				}
				if u.Thoughts != nil {
					out += *u.Thoughts
				}
				m.set(&m.out, &out)
			}
			m.set(&m.cacheRead, u.Cached)
		}
	}
}

func (m *meter) set(dst *int64, v *int64) {
	if v != nil {
		*dst = *v
		m.seen = true
	}
}

func (m *meter) setModel(s string) {
	if s != "" {
		m.model = strings.TrimPrefix(s, "models/")
	}
}

// maxMeteredBody bounds what a non-streamed response keeps for metering
// (the response itself passes in full).
const maxMeteredBody = 16 << 20

// meteredBody passes a response body through unchanged and meters it: an
// event stream line by line as it passes, any other body once it is whole.
// done is called once, when the body ends or is closed.
type meteredBody struct {
	rc     io.ReadCloser
	m      *meter
	stream bool
	line   []byte // partial SSE line
	buf    bytes.Buffer
	once   sync.Once
	done   func(*meter)
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.feed(p[:n])
	}
	if err != nil {
		b.finish()
	}
	return n, err
}

func (b *meteredBody) Close() error {
	err := b.rc.Close()
	b.finish()
	return err
}

func (b *meteredBody) feed(p []byte) {
	if !b.stream {
		if b.buf.Len()+len(p) <= maxMeteredBody {
			b.buf.Write(p)
		}
		return
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(b.line)+len(p) <= maxMeteredBody {
				b.line = append(b.line, p...)
			}
			return
		}
		b.line = append(b.line, p[:i]...)
		b.sseLine(b.line)
		b.line = b.line[:0]
		p = p[i+1:]
	}
}

func (b *meteredBody) sseLine(line []byte) {
	line = bytes.TrimRight(line, "\r")
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return
	}
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '{' && hasUsage(data) {
		b.m.object(data)
	}
}

// hasUsage reports whether an event has a "usage…" key whose value is an
// object: most of a stream is deltas with none (or "usage":null), and
// every protocol's event with usage also names the model.
func hasUsage(data []byte) bool {
	for {
		i := bytes.Index(data, []byte(`"usage`))
		if i < 0 {
			return false
		}
		data = data[i+len(`"usage`):]
		j := bytes.IndexByte(data, '"')
		if j < 0 {
			return false
		}
		rest := bytes.TrimLeft(data[j+1:], " \t\r\n")
		if len(rest) > 0 && rest[0] == ':' {
			if rest = bytes.TrimLeft(rest[1:], " \t\r\n"); len(rest) > 0 && rest[0] == '{' {
				return true
			}
		}
	}
}

func (b *meteredBody) finish() {
	b.once.Do(func() {
		if b.stream {
			if len(b.line) > 0 {
				b.sseLine(b.line)
			}
		} else {
			meterWhole(b.m, b.buf.Bytes())
		}
		b.done(b.m)
	})
}

// meterWhole meters a complete body: one JSON object, a JSON array of them
// (Gemini's streamGenerateContent without alt=sse), or JSON lines.
func meterWhole(m *meter, body []byte) {
	body = bytes.TrimSpace(body)
	switch {
	case len(body) == 0:
	case body[0] == '[':
		var arr []json.RawMessage
		if json.Unmarshal(body, &arr) == nil {
			for _, o := range arr {
				m.object(o)
			}
		}
	case body[0] == '{' && json.Valid(body):
		m.object(body)
	default:
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(make([]byte, 64<<10), maxMeteredBody)
		for sc.Scan() {
			line := bytes.TrimSpace(sc.Bytes())
			if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				line = bytes.TrimSpace(d)
			}
			if len(line) > 0 && line[0] == '{' {
				m.object(line)
			}
		}
	}
}
