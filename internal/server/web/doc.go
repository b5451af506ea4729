// Package web is the team server's web UI, served under /ui/: a run list
// with filters, a run page (status, attempts, checks and their output,
// live logs and events over Server-Sent Events, the diff with syntax
// highlighting, the egress summary, usage and cost, the verdict form), a
// submit form, and a sign-in page that trades an API token for a session
// cookie.
//
// Every page is rendered from the API's own documents (Options.API, the
// server's route handlers called in process), so the UI cannot show what
// the API would not. Everything it shows that an agent or a client wrote
// (the task, logs, file names, the diff, check output, messages) goes
// through html/template's escaping, never concatenated into markup; the
// script (static/app.js) writes only text nodes.
//
// Every answer carries a strict Content-Security-Policy (no inline script
// or style, no eval, no framing), nosniff and no-referrer. Every form
// carries a per-session CSRF token, checked on POST, on top of the
// server's cross-origin protection. State changes are POSTs only.
//
// The package never decides who a request comes from: the server does
// (its authenticate function) and tells it through the request's context
// (WithViewer); it keeps the sessions, whose tokens the server looks up
// again on every request (SessionToken). Assets are embedded: the UI
// works with no network.
package web
