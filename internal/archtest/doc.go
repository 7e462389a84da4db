// Package archtest holds the architecture's test: it reads the imports of every
// package of the module (non-test files only) and fails when one breaks the layers
// of docs/architecture.md or one of the rules beside them, naming the chain of
// imports that does. It has no code of its own to import.
package archtest
