package config

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// Setting is one effective setting and where its value came from.
type Setting struct {
	Key string `json:"key"`
	// Value is the effective value, as text.
	Value string `json:"value"`
	// Source is "default", "config file" (Path) or "environment NAME".
	Source string `json:"source"`
	Env    string `json:"env,omitempty"` // the variable that overrides it
}

// setting names one scalar key: its config key, environment variable and
// how to print its effective value.
type setting struct {
	key, env string
	value    func(Settings) string
}

var settings = []setting{
	{"max_parallel", "AGENTRUN_MAX_PARALLEL", func(s Settings) string { return strconv.Itoa(s.MaxParallel) }},
	{"sandbox", "AGENTRUN_SANDBOX", func(s Settings) string { return s.Sandbox }},
	{"attempts", "AGENTRUN_ATTEMPTS", func(s Settings) string { return strconv.Itoa(s.Attempts) }},
	{"timeout", "AGENTRUN_TIMEOUT", func(s Settings) string { return s.Timeout.String() }},
	{"author_name", "AGENTRUN_AUTHOR_NAME", func(s Settings) string { return s.AuthorName }},
	{"author_email", "AGENTRUN_AUTHOR_EMAIL", func(s Settings) string { return s.AuthorEmail }},
	{"max_files", "AGENTRUN_MAX_FILES", func(s Settings) string { return strconv.Itoa(s.MaxFiles) }},
	{"max_bytes", "AGENTRUN_MAX_BYTES", func(s Settings) string { return strconv.FormatInt(s.MaxBytes, 10) }},
	{"disk", "AGENTRUN_DISK", func(s Settings) string {
		if s.DiskBytes == 0 {
			return ""
		}
		return strconv.FormatInt(s.DiskBytes, 10)
	}},
	{"disk_inodes", "AGENTRUN_DISK_INODES", func(s Settings) string {
		if s.DiskInodes == 0 {
			return ""
		}
		return strconv.FormatInt(s.DiskInodes, 10)
	}},
	{"cache_budget", "AGENTRUN_CACHE_BUDGET", func(s Settings) string { return strconv.FormatInt(s.CacheBudget, 10) }},
	{"disk_budget", "AGENTRUN_DISK_BUDGET", func(s Settings) string {
		if s.DiskBudget == 0 {
			return ""
		}
		return strconv.FormatInt(s.DiskBudget, 10)
	}},
	{"workspace", "AGENTRUN_WORKSPACE", func(s Settings) string { return cmp.Or(s.Workspace, "auto") }},
	{"history", "AGENTRUN_HISTORY", func(s Settings) string { return cmp.Or(s.History, "shallow") }},
	{"max_tokens", "AGENTRUN_MAX_TOKENS", func(s Settings) string { return strconv.FormatInt(s.MaxTokens, 10) }},
	{"max_cost", "AGENTRUN_MAX_COST", func(s Settings) string { return strconv.FormatFloat(s.MaxCost, 'f', -1, 64) }},
	{"model_server", "AGENTRUN_MODEL_SERVER", func(s Settings) string { return s.ModelServer }},
	{"image", "AGENTRUN_IMAGE", func(s Settings) string { return s.Image }},
	{"policy", "AGENTRUN_POLICY", func(s Settings) string { return s.Policy }},
}

// Explain lists every scalar setting with its effective value and source,
// and the table entries (model servers, providers, prices) of the file.
// Key sources are named, never read.
func Explain(getenv func(string) string) ([]Setting, error) {
	s, err := Load(getenv)
	if err != nil {
		return nil, err
	}
	defined := map[string]bool{}
	if b, err := os.ReadFile(s.Path); err == nil {
		var c Config
		if md, err := toml.Decode(string(b), &c); err == nil {
			for _, k := range md.Keys() {
				defined[k.String()] = true
			}
		}
	}
	var out []Setting
	for _, st := range settings {
		src := "default"
		switch {
		case st.env != "" && getenv(st.env) != "":
			src = "environment " + st.env
		case defined[st.key]:
			src = "config file"
		}
		out = append(out, Setting{Key: st.key, Value: st.value(s), Source: src, Env: st.env})
	}
	for _, name := range slices.Sorted(maps.Keys(s.File.ModelServers)) {
		m := s.File.ModelServers[name]
		p := "model_servers." + name + "."
		out = append(out, Setting{Key: p + "url", Value: m.URL, Source: "config file"})
		if m.MaxConcurrent > 0 {
			out = append(out, Setting{Key: p + "max_concurrent", Value: strconv.Itoa(m.MaxConcurrent), Source: "config file"})
		}
		out = append(out, keySetting(p, m.KeySource)...)
	}
	for _, name := range slices.Sorted(maps.Keys(s.File.Providers)) {
		pr := s.File.Providers[name]
		p := "providers." + name + "."
		if pr.URL != "" {
			out = append(out, Setting{Key: p + "url", Value: pr.URL, Source: "config file"})
		}
		out = append(out, keySetting(p, pr.KeySource)...)
	}
	for _, tag := range slices.Sorted(maps.Keys(s.File.Images)) {
		out = append(out, Setting{Key: "images." + strconv.Quote(tag), Value: s.File.Images[tag], Source: "config file"})
	}
	for _, name := range slices.Sorted(maps.Keys(s.File.Prices)) {
		pr := s.File.Prices[name]
		v := fmt.Sprintf("input %g, output %g", pr.Input, pr.Output)
		if pr.CachedInput != nil {
			v += fmt.Sprintf(", cached_input %g", *pr.CachedInput)
		}
		if pr.CacheWrite != nil {
			v += fmt.Sprintf(", cache_write %g", *pr.CacheWrite)
		}
		out = append(out, Setting{Key: "prices." + strconv.Quote(name), Value: v + " (USD per million tokens)", Source: "config file"})
	}
	return out, nil
}

func keySetting(prefix string, k KeySource) []Setting {
	switch {
	case k.APIKeyEnv != "":
		return []Setting{{Key: prefix + "api_key_env", Value: k.APIKeyEnv, Source: "config file"}}
	case k.APIKeyFile != "":
		return []Setting{{Key: prefix + "api_key_file", Value: k.APIKeyFile, Source: "config file"}}
	case k.APIKeyCommand != "":
		return []Setting{{Key: prefix + "api_key_command", Value: k.APIKeyCommand, Source: "config file"}}
	}
	return nil
}

// knownKeys lists the config file's keys, tables as "table.*.key".
func knownKeys() []string {
	var keys []string
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("toml")
			if f.Anonymous {
				walk(f.Type, prefix)
				continue
			}
			if tag == "" {
				continue
			}
			switch {
			case f.Type.Kind() == reflect.Map && f.Type.Elem().Kind() == reflect.Struct:
				walk(f.Type.Elem(), prefix+tag+".*.")
			default:
				keys = append(keys, prefix+tag)
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")
	return keys
}

// Suggest is the known key nearest to an unknown one ("" when none is
// close): a typo such as "max_paralel" gets "max_parallel".
func Suggest(unknown string) string {
	parts := strings.Split(unknown, ".")
	best, bestD := "", 3
	for _, k := range knownKeys() {
		kp := strings.Split(k, ".")
		if len(kp) != len(parts) {
			continue
		}
		cand := make([]string, len(kp))
		d := 0
		for i := range kp {
			if kp[i] == "*" {
				cand[i] = parts[i]
				continue
			}
			cand[i] = kp[i]
			d += distance(parts[i], kp[i])
		}
		if d < bestD && d > 0 {
			best, bestD = strings.Join(cand, "."), d
		}
	}
	return best
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
