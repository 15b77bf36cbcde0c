// Package transport owns gostream's wire protocol (docs/design.md section 4):
// length-prefixed frames, one codec per message, error codes, and the RPC
// client (Conn, Pool) and server (Server).
//
// Promises:
//
//   - Every decoder checks each length and count against the bytes left
//     before it allocates; a body decodes exactly or not at all
//     (ErrMalformed).
//   - Errors cross the wire as codes, and errors.Is matches the same
//     sentinels on both sides.
//   - Every call has a deadline (DefaultCallTimeout when its context has
//     none).
//   - A Server's memory for requests and responses is bounded per
//     connection and in all (ServerConfig): a client that sends more than
//     it reads is slowed by TCP, and when the server's memory is spent
//     requests are refused with the retriable ErrBusy, never queued
//     without bound. Small requests keep room of their own.
//   - A Server bounds its connections in all and per client IP address,
//     closes idle ones (DefaultIdleTimeout), answers a frame over its
//     limit (FrameLimit of the batch limit) with ErrMessageTooLarge and
//     goes on, and closes a connection that does not speak the protocol.
//   - A Pool closes its own idle connections (DefaultClientIdleTimeout)
//     before a server would, so a call never meets a server's idle close.
//
// It imports only the standard library, hclog and package record.
package transport
