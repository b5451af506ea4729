package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/agentrun/agentrun/internal/policy"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestReadmePolicy holds the README's "Organization policy" section to
// the policy file's reader: its key table names exactly the keys the
// reader takes, its example file uses every one of them, and the example
// is a valid policy that `agentrun policy check` takes, printing the
// digest the reader computes.
func TestReadmePolicy(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Organization policy\n")
	if !ok {
		t.Fatal("README has no '## Organization policy' section")
	}
	section, _, _ = strings.Cut(section, "\n## ")

	// The table: the first column's keys, in backquotes.
	var documented []string
	row := regexp.MustCompile("(?m)^\\| (`[a-z_.]+`(?:, `[a-z_.]+`)*) \\|")
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		for _, k := range strings.Split(m[1], ", ") {
			documented = append(documented, strings.Trim(k, "`"))
		}
	}
	if !slices.Equal(documented, policy.OrgKeys) {
		t.Errorf("the README's key table %v, the reader's keys %v", documented, policy.OrgKeys)
	}

	example := fenced(t, section, "toml")
	var raw map[string]any
	md, err := toml.Decode(example, &raw)
	if err != nil {
		t.Fatalf("the example is not TOML: %v", err)
	}
	var used []string
	for _, k := range md.Keys() {
		used = append(used, k.String())
	}
	for _, k := range policy.OrgKeys {
		if !slices.Contains(used, k) {
			t.Errorf("the example does not use the key %s", k)
		}
	}
	org, err := policy.ParseOrg([]byte(example), "example")
	if err != nil {
		t.Fatalf("the example is not a valid policy: %v", err)
	}
	p := filepath.Join(t.TempDir(), "policy.toml")
	if err := os.WriteFile(p, []byte(example), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testsupport.Agentrun(t), "policy", "check", p)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), org.Digest()) {
		t.Fatalf("agentrun policy check on the example: %v\n%s", err, out)
	}
}
