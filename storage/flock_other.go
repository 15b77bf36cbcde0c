//go:build !unix

package storage

import "os"

// flock does nothing where there is no flock: a root is not protected from
// a second process there.
func flock(*os.File) error { return nil }
