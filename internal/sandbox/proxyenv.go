package sandbox

import (
	"strconv"
	"strings"
)

// JVMProxyEnv is the environment that points JVM tools at the egress
// relay on host:port inside a sandbox. The JVM ignores HTTP(S)_PROXY (git,
// npm, pip, cargo and go honour them): it reads proxy system properties,
// which JAVA_TOOL_OPTIONS gives every JVM, and GRADLE_OPTS and MAVEN_OPTS
// give Gradle's and Maven's launchers. Loopback stays direct, as NO_PROXY
// says for the others. The backends set these beside the proxy variables,
// over whatever the spec's environment had for them.
func JVMProxyEnv(host string, port int) []string {
	p := strconv.Itoa(port)
	opts := strings.Join([]string{
		"-Dhttp.proxyHost=" + host, "-Dhttp.proxyPort=" + p,
		"-Dhttps.proxyHost=" + host, "-Dhttps.proxyPort=" + p,
		"-Dhttp.nonProxyHosts=localhost|127.0.0.1|[::1]",
	}, " ")
	return []string{"JAVA_TOOL_OPTIONS=" + opts, "GRADLE_OPTS=" + opts, "MAVEN_OPTS=" + opts}
}
