// Package layout holds the tests that keep the tree's own description
// true: every file or pattern a package's doc comment names exists, a doc
// comment that lists its package's files lists all of them,
// docs/layout.md names every package and nothing that is gone, the
// binary's doc comment names every command, no shipped package imports
// the test kit, and internal/ holds only what the binary runs.
package layout
