// Package seal carries secret values from the team server to one agent
// host: the host makes a key pair at enrolment and keeps its private key;
// the server seals the values a run needs (its provider keys) to the
// host's public key, bound to the run, the host and the lease's fencing
// token, and the host opens them in memory.
//
// The suite is HPKE (RFC 9180, crypto/hpke) in base mode: the hybrid
// post-quantum KEM ML-KEM-768 with X25519, HKDF-SHA256 and AES-256-GCM.
// A sealed blob opens only with the private key it was sealed to and the
// same Info: one replayed for another run, host or lease does not open.
//
// It must never log, store or print a value it seals or opens, nor a
// private key; callers keep opened values in memory only.
package seal
