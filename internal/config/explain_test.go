package config

import (
	"os"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/catalog"
)

func TestSuggest(t *testing.T) {
	for in, want := range map[string]string{
		"max_paralel":               "max_parallel",
		"atempts":                   "attempts",
		"model_servers.lm.max_conc": "",
		"model_servers.lm.urll":     "model_servers.lm.url",
		"providers.openai.api_key":  "",
		"completely_unrelated_key":  "",
	} {
		if got := Suggest(in); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReadNamesTheKey(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]string{
		"max_paralel = 2\n": `did you mean "max_parallel"`,
		"attempts = 0\n":    "attempts = 0: want at least 1",
	} {
		p := dir + "/config.toml"
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Read(p)
		ce, ok := catalog.As(err)
		if !ok || ce.Code != "bad_config" || !strings.Contains(ce.Cause+" "+ce.Fix, want) || !strings.Contains(ce.Cause, p) {
			t.Errorf("%q: %v (fix %q), want %q naming the file", content, err, ce.Fix, want)
		}
	}
}
