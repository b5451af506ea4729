package server

import (
	"encoding/json"
	"net/http"

	"github.com/agentrun/agentrun/internal/catalog"
)

// statusByCode is the HTTP status of the catalog codes that the exit
// status alone does not place.
var statusByCode = map[string]int{
	catalog.Unauthorized.Code: http.StatusUnauthorized,
	catalog.CrossOrigin.Code:  http.StatusForbidden,
	catalog.RunActive.Code:    http.StatusConflict,
	catalog.NotResumable.Code: http.StatusConflict,
	catalog.NotFinished.Code:  http.StatusConflict,
	catalog.BranchAhead.Code:  http.StatusConflict,
	catalog.NoPatch.Code:      http.StatusConflict,
	catalog.AmbiguousID.Code:  http.StatusConflict,
	catalog.RunDamaged.Code:   http.StatusInternalServerError,
	catalog.Home.Code:         http.StatusInternalServerError,
	catalog.DiskFull.Code:     http.StatusInsufficientStorage,
	catalog.BadBundle.Code:    http.StatusUnprocessableEntity,

	// A run the organization policy does not allow.
	catalog.PolicyViolation.Code: http.StatusForbidden,
	// Users, tokens and quotas.
	catalog.TokenExpired.Code:  http.StatusUnauthorized,
	catalog.TokenRevoked.Code:  http.StatusUnauthorized,
	catalog.UserDisabled.Code:  http.StatusForbidden,
	catalog.Forbidden.Code:     http.StatusForbidden,
	catalog.QuotaExceeded.Code: http.StatusTooManyRequests,
	catalog.UserExists.Code:    http.StatusConflict,
	catalog.EnrolRefused.Code:  http.StatusForbidden,
	catalog.HostRefused.Code:   http.StatusUnauthorized,
	catalog.LeaseLost.Code:     http.StatusConflict,
	catalog.RecordStale.Code:   http.StatusConflict,
	// A stolen credential must not swap in another sealing key.
	catalog.SealKeyRefused.Code: http.StatusForbidden,
}

// httpStatus is the one place that maps a catalog error to an HTTP status.
func httpStatus(e *catalog.Error) int {
	if s, ok := statusByCode[e.Code]; ok {
		return s
	}
	switch e.Exit {
	case catalog.ExitUsage:
		return http.StatusBadRequest
	case catalog.ExitNotFound:
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}

// errorDoc is the CLI's --json error document.
type errorDoc struct {
	Error *catalog.Error `json:"error"`
}

// writeError answers with err as a catalog error; an error from outside
// the catalog is an internal one.
func writeError(w http.ResponseWriter, err error) {
	e, ok := catalog.As(err)
	if !ok {
		e = catalog.Internal.Wrap(err, "%v", err)
	}
	writeDoc(w, httpStatus(e), errorDoc{Error: e})
}

// writeDoc answers with v as JSON.
func writeDoc(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errorDoc{Error: catalog.Internal.New("encode the answer: %v", err)})
	}
	writeRaw(w, status, b)
}

// writeRaw answers with a JSON document already encoded.
func writeRaw(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
