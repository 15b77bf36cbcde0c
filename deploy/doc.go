// Package deploy holds no code: its directory keeps the files that run
// gostream outside `make run` (the systemd unit and its environment file,
// and docker-compose.secure.yml, the override of docker-compose.yml that
// turns security on), and its tests check those files, docker-compose.yml
// and the Dockerfile at the top of the module against the binaries they
// start. Every GOSTREAM_* variable they set must be a flag's environment
// twin in the binary's --help, so renaming a flag without updating them
// fails `go test`.
//
// Invariants its tests hold the files to:
//
//   - Every GOSTREAM_* variable the compose files and node.env.example
//     set is an environment twin of a flag of the binary that reads it,
//     and node.env.example shows every flag of gostream-node, set or
//     commented out.
//   - The unit runs gostream-node with no argument: its configuration
//     comes from the EnvironmentFile alone, and a reload sends SIGHUP
//     (the node reloads its TLS, tokens and gossip key files).
//   - The image's entrypoint is gostream-node, and it runs as a user of
//     its own, never root.
//   - docker-compose.yml alone runs three plaintext nodes;
//     docker-compose.secure.yml gives each its own certificate, and all
//     the one CA, gossip key, tokens and superusers.
//
// It imports nothing: its tests run the binaries and read the files as
// an operator's tools would.
package deploy
