package docs

import _ "embed"

// OpenAPI is the team server's API document (openapi.json), served at
// /v1/openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte
