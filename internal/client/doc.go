// Package client is the HTTP client of the team server's API (/v1, see
// docs/openapi.json): the CLI's commands call it when --server (or
// AGENTRUN_SERVER) names a server. It returns each route's document as the
// server wrote it (the --json document of the command of the same name),
// follows a run's Server-Sent Events, and downloads bundles.
//
// Every error it returns is a catalog error: the server's own ({code,
// error, cause, fix}, with the exit status the catalog gives its code), or
// server_unreachable, server_tls or server_protocol for a server that
// cannot be reached, cannot be trusted or does not speak the API. It
// never retries a request that changes anything.
package client
