// Package archtest holds tests of the code's shape: the seams are kept
// (cli, supervisor and submit import no implementation, and no core
// package branches on an implementation's name), and no file or function
// grows past what a reader takes in at once. It has no code of its own.
package archtest
