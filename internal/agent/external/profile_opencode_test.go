package external

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/agenttest"
	"github.com/agentrun/agentrun/internal/modelserver"
)

func TestOpencodeProfileBare(t *testing.T) {
	bin := agenttest.CLI(t, "opencode", "opencode")
	e := newChatCLIEnv(t, bin)
	const content = "hello from opencode\n"
	srv := modelserver.New(t, "sk-test-opencode-key", "gpt-4.1", modelserver.WriteFileIn(e.Repo, "hello.txt", content))
	in := LaunchInput{BaseURL: srv.URL + "/openai", Key: srv.Key}
	out, d, err := e.run(t, opencodeProfile, in, "Write hello.txt")
	t.Logf("opencode took %v", d)
	if testing.Verbose() {
		t.Logf("output:\n%s", out)
		logChatRequests(t, srv)
	}
	if err != nil {
		t.Fatalf("opencode: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(e.Repo, "hello.txt")); err != nil || string(b) != content {
		t.Fatalf("hello.txt = %q, %v\n%s", b, err, out)
	}
	checkChatRequests(t, srv)
	if !strings.Contains(out, "Done: hello.txt is written.") {
		t.Errorf("output lacks the model's final text:\n%s", out)
	}

	srv.SetScript(modelserver.Text("Resumed."))
	first := len(srv.Requests())
	in.Resume = true
	out, d, err = e.run(t, opencodeProfile, in, "Say resumed")
	t.Logf("opencode resume took %v", d)
	if err != nil {
		t.Fatalf("opencode resume: %v\n%s", err, out)
	}
	var resumed bool
	for _, r := range srv.Requests()[first:] {
		if r.Protocol == modelserver.Chat && bytes.Contains(r.Body, []byte("Write hello.txt")) && bytes.Contains(r.Body, []byte("Say resumed")) {
			resumed = true
		}
	}
	if !resumed {
		logChatRequests(t, srv)
		t.Fatalf("the resumed run's requests lack the earlier conversation\n%s", out)
	}
}

// TestChatProfilesLaunch checks the Launch output of the chat-completions
// profiles without running them (crush cannot be installed here).
func TestChatProfilesLaunch(t *testing.T) {
	in := LaunchInput{Binary: "/opt/x/bin/cli", BaseURL: "http://127.0.0.1:3129/openai", Key: "ph-key", Home: "/home/agent", WorkDir: "/workspace"}
	for _, tc := range []struct {
		p          Profile
		file       string
		want       []string // in Command
		resumeWant string
		urlKey     string // JSON path of the base URL in the config
	}{
		{crushProfile, ".config/crush/crush.json", []string{"'/opt/x/bin/cli' run --quiet --data-dir", "--data-dir '/home/agent/.local/share/crush/data'", "-m 'agentrun/gpt-4.1'"}, " --continue", "providers.agentrun.base_url"},
		{opencodeProfile, ".config/opencode/opencode.json", []string{"'/opt/x/bin/cli' run --title= -m 'agentrun/gpt-4.1'"}, " --continue", "provider.agentrun.options.baseURL"},
		{qwenProfile, ".qwen/settings.json", []string{"'/opt/x/bin/cli' --yolo -p"}, " --continue", ""},
	} {
		t.Run(tc.p.Name, func(t *testing.T) {
			l := tc.p.Launch(in)
			if tc.p.Name == "crush" && strings.Contains(l.Command, "--yolo") {
				// (crush's --yolo is its interactive command's: crush
				// run refuses it, "Unknown flag: --yolo")
				t.Errorf("crush run with --yolo: %s", l.Command)
			}
			if !strings.HasSuffix(l.Command, ` "$(cat)"`) || strings.Count(l.Command, "$(") != 1 {
				t.Fatalf("command %q", l.Command)
			}
			for _, w := range tc.want {
				if !strings.Contains(l.Command, w) {
					t.Errorf("command %q lacks %q", l.Command, w)
				}
			}
			if strings.Contains(l.Command, "--continue") || strings.Contains(l.Command, "/workspace") {
				t.Errorf("command %q", l.Command)
			}
			cfg, ok := l.Files[tc.file]
			if !ok {
				t.Fatalf("no %s in %v", tc.file, l.Files)
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(cfg), &v); err != nil {
				t.Fatalf("%s: %v", tc.file, err)
			}
			if tc.urlKey != "" {
				var cur any = v
				for _, k := range strings.Split(tc.urlKey, ".") {
					cur, _ = cur.(map[string]any)[k]
				}
				if cur != "http://127.0.0.1:3129/openai/v1" || !strings.Contains(cfg, `"ph-key"`) {
					t.Errorf("%s: base URL %v or key missing:\n%s", tc.file, cur, cfg)
				}
			}
			for name := range l.Files {
				if strings.HasPrefix(name, "/") || strings.Contains(name, "..") {
					t.Errorf("file %q", name)
				}
			}
			for _, e := range l.Env {
				if !strings.Contains(e, "=") {
					t.Errorf("env %q", e)
				}
			}
			in2 := in
			in2.Resume = true
			if r := tc.p.Launch(in2).Command; !strings.Contains(r, tc.resumeWant) {
				t.Errorf("resume command %q lacks %q", r, tc.resumeWant)
			}
		})
	}
	if crushProfile.Tested == "" || crushProfile.TestedFrom == "" {
		// (npm's @charmland/crush starts at 0.92.0 and its install
		// downloads from GitHub: the version tested is not what Install
		// gives, and submit --help and doctor must say where it came from)
		t.Errorf("crush: tested with %q from %q", crushProfile.Tested, crushProfile.TestedFrom)
	}
	env := strings.Join(crushProfile.Launch(in).Env, " ")
	for _, w := range []string{"CRUSH_DISABLE_METRICS=1", "CRUSH_DISABLE_PROVIDER_AUTO_UPDATE=1"} {
		if !strings.Contains(env, w) {
			t.Errorf("crush env %q lacks %s", env, w)
		}
	}
	in.Resume, in.Session = true, "ses_abc"
	if c := opencodeProfile.Launch(in).Command; !strings.Contains(c, "--session 'ses_abc'") {
		t.Errorf("opencode resume by id: %q", c)
	}
	in.Session = "0b6e2c1a-uuid"
	if c := qwenProfile.Launch(in).Command; !strings.Contains(c, "--resume '0b6e2c1a-uuid'") {
		t.Errorf("qwen resume by id: %q", c)
	}
	in.Resume = false
	if c := qwenProfile.Launch(in).Command; !strings.Contains(c, "--session-id '0b6e2c1a-uuid'") {
		t.Errorf("qwen new session id: %q", c)
	}
}
