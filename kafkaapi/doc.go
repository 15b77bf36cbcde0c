// Package kafkaapi is Kafka's wire protocol as a front end of a gostream
// node (docs/kafka.md): it serves the Kafka clients of one listener,
// decodes each request with franz-go's kmsg, has the core (broker.Broker)
// do the work with the connection's principal, and encodes the answer:
// with kmsg, but for Fetch's, which writes its record batches from the
// reads' buffers rather than copy them (fetchAnswer; its encoding is
// checked against kmsg's, byte for byte).
//
// Invariants:
//
//   - A connection's requests are answered in the order they came;
//     acks=0 produces get no answer. A produce is appended when it is
//     read, so the next request is read while its replicas make it
//     durable (up to 16 requests, and MaxRequestBytes of frames, read
//     and not yet answered); every other answer is computed in turn, one
//     at a time, when the answers before it are written. Every append's
//     wait is run, also for a connection that is gone.
//   - Bytes that are not a request close the connection (a frame size out
//     of bounds, a header or body that does not decode, a key that is not
//     Kafka's); a request of a key or version not served is answered
//     UNSUPPORTED_VERSION where its response has an error code. Nothing
//     from the network is trusted: frames are bounded by MaxRequestBytes,
//     and a record batch is checked whole (record.WrapKafka) before
//     anything is written.
//   - ApiVersions above ours is answered in v0 with UNSUPPORTED_VERSION and
//     our list, never decoded; its response header has no tagged fields.
//   - Every produce is answered only once every active replica holds its
//     batch durably, whatever acks asked for.
//   - Errors reach the client through one table (errors.go) from the
//     core's codes.
//
// It imports broker, groups (the coordinator's requests and errors), record,
// metadata and transport (for the core's error codes and credentials), and
// franz-go's kmsg and kerr; nothing above it.
package kafkaapi
