package egress

// ProxyEnv returns the environment that points HTTP clients inside the
// sandbox at the relay of the egress proxy, proxyURL (e.g.
// "http://127.0.0.1:3128"): HTTP_PROXY, HTTPS_PROXY and their lowercase
// forms, and NO_PROXY (also lowercase) for loopback, which stays inside
// the sandbox.
func ProxyEnv(proxyURL string) []string {
	const noProxy = "localhost,127.0.0.1,::1"
	return []string{
		"HTTP_PROXY=" + proxyURL,
		"HTTPS_PROXY=" + proxyURL,
		"http_proxy=" + proxyURL,
		"https_proxy=" + proxyURL,
		"NO_PROXY=" + noProxy,
		"no_proxy=" + noProxy,
	}
}
