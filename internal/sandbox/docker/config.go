package docker

// Paths as processes inside the container see them.
const (
	WorkDir     = "/workspace"
	homeDir     = "/home/agent"
	innerDir    = "/.agentrun"
	innerExe    = innerDir + "/agentrun"
	innerLink   = innerDir + "/runner.sock"
	runnerSock  = "runner.sock"
	innerProxy  = innerDir + "/egress.sock"
	innerGate   = innerDir + "/gateway.sock"
	proxyPort   = 3128
	gatewayPort = 3129
	defaultPath = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

	// EntryName is the hidden entry point of the binary inside the
	// container: "__docker init" is pid 1, "__docker serve" the runner.
	EntryName = "__docker"
	roleInit  = "init"
	roleServe = "serve"
	// configEnv carries the inside's config to the init; the init takes
	// it out of its environment and hands it to the runner on a pipe.
	configEnv    = "AGENTRUN_DOCKER_CONFIG"
	serveCfgFD   = 3
	maxConfigLen = 1 << 20
)

// config is what the host tells the inside, as JSON in configEnv.
type config struct {
	// Env is the complete base environment of the runner's commands.
	Env []string `json:"env"`
	// Proxy and Gateway: the host sockets are mounted at innerProxy and
	// innerGate; the runner bridges them to these loopback addresses.
	ProxyListen   string `json:"proxy_listen,omitempty"`
	GatewayListen string `json:"gateway_listen,omitempty"`
	// Forwards are the host's loopback services reached through the
	// proxy at the same address inside (sandbox.Spec.Forwards).
	Forwards []string `json:"forwards,omitempty"`
	// Token is what the runner sends first on its connection to the
	// host's socket at innerLink, so that the host knows it is the runner.
	Token string `json:"token"`
}
