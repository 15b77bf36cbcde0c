// Package deploy holds no code: its directory keeps the files that run
// gostream outside `make run` (the systemd unit and its environment file,
// and docker-compose.secure.yml, the override of docker-compose.yml that
// turns security on), and its tests check those files, docker-compose.yml
// and the Dockerfile at the top of the module against the binaries they
// start. Every GOSTREAM_* variable they set must be a flag's environment
// twin in the binary's --help, so renaming a flag without updating them
// fails `go test`.
package deploy
