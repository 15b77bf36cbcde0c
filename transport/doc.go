// Package transport owns gostream's wire protocol (docs/design.md section 4):
// frames over TCP, one codec per message, the error codes, and the RPC
// client (Conn, Pool) and server (Server) with their limits. It imports only
// the standard library and hclog; record batches cross it as bytes.
//
// # Frames
//
// Every request and every response is one frame, big-endian:
//
//	[u32 length][u16 api][u16 version][u32 correlation id][body]
//
// where length counts every byte after itself (FrameHeaderSize plus the
// body). A response carries the API, version and correlation id of its
// request. Every API is at Version1 today; a gostream node answers another
// version, or an API it does not know, with UnsupportedVersion.
//
// A response body starts with its error part,
//
//	[u16 code][u8 retriable][string message]
//
// Code 0 means success, and the response message follows; any other code
// ends the body (SplitResponse).
//
// Inside a message, integers are big-endian, a string has a u16 length, a
// byte field (a record batch) a u32 length, and an array a u32 count. Every
// decoder checks each length and count against the bytes left before it
// allocates, so a peer that claims a large length costs nothing; a body
// decodes exactly, with no byte left over, or not at all (ErrMalformed).
// The frame reader and the decoders are fuzzed.
//
// # Buffers
//
// Frames and bodies of batches are most of a node's memory traffic, so
// their buffers are reused (package internal/bufpool) wherever their last
// user is known: a client's request frame once it is written, a server's
// response frame once written, and the body of a request whose handler
// says it keeps nothing of it (BodyReuser: Produce and Replicate) once its
// response is written and every Request.Hold on it released. A request's
// large batches are not copied into its frame: a client writes the frame's
// head and the batches where they lie in one writev (gatherer), as a
// server writes a fetch's batches from its read buffer (splicer). On a
// plain TCP connection a fetch's batches need no buffer at all: the
// response carries a range of the segment file (FetchResponse.File,
// FileRange), which the server writes after the frame's head straight
// from the page cache to the socket (SendFile: splice(2) through a
// pooled pipe of 1 MiB); over TLS it reads the range into memory first.
//
// # Requests and responses
//
// A Conn carries many calls at once: requests are written whole and in the
// order their Sends run (Call is Send then Wait), and responses are matched
// to calls by correlation id, in whatever order the server answers. Every
// call has a deadline: its context's, or DefaultCallTimeout when it has
// none, so a paused peer never hangs a caller. What a failed call means:
//
//   - ErrNotSent (it matches ErrBrokerNotAvailable): the request never
//     reached the server whole; sending it again cannot do it twice.
//   - ErrConnClosed (also BrokerNotAvailable) or a deadline (ErrTimeout):
//     the request went out and no answer came; it may or may not have
//     taken effect.
//   - An *Error from the server: the server's answer, with its code.
//
// A call that times out on a connection where nothing at all has arrived
// for SilentAfter since its request went out closes that connection, and
// connections carry TCP_USER_TIMEOUT (DefaultUserTimeout), so that a dead
// peer or path is redialed rather than waited on. A connection that reads
// anything that is not a frame of ours fails with ErrFrame and is closed;
// one that reads an HTTP answer says it dialed an HTTP address.
//
// A Pool keeps one connection per address, dialed on first use (from
// ConnConfig.LocalIP when set: gostream-node --dial-source). It dials anew
// after a connection failed, and after one was idle for
// DefaultClientIdleTimeout (one minute, half the server's idle timeout), so
// that a call never meets a server closing the connection for idleness.
// Pool.Call makes a call once more on a new connection when the pooled one
// turns out dead, only if that cannot do it twice: the request was never
// sent, or its API has the effect of once when made twice (Idempotent: the
// reads, and a few others). Retrying on a retriable code is the caller's
// choice (package client makes it).
//
// # Error codes
//
// Errors cross the wire as an Error: a code, whether sending the same
// request again may succeed, and a message for people that starts with the
// code's name. Errors with the same code match under errors.Is, so the
// sentinels (ErrNotLeader, ErrBusy, ...) work on both sides of a connection.
// A server turns its errors into codes once, at its edge (ToWire, after
// mapping each package's sentinels); an error that wraps no sentinel is
// Unknown. The codes, whose numbers never change:
//
//	code  name                      retriable
//	1     Unknown                   no
//	2     InvalidRequest            no
//	3     UnsupportedVersion        no
//	4     UnknownTopic              no
//	5     UnknownPartition          no
//	6     TopicExists               no
//	7     InvalidTopicName          no
//	8     InvalidPartitions         no
//	9     OffsetOutOfRange          no
//	10    NotLeader                 yes  after refreshing metadata
//	11    StaleEpoch                no
//	12    TopicSealed               no
//	13    MessageTooLarge           no
//	14    InvalidBatch              no
//	15    Timeout                   yes
//	16    ReplicationFailed         no   the leader keeps the batch
//	17    NotController             yes  ask the controller it names
//	18    LeaderStillAvailable      no
//	19    NoEligibleReplica         no
//	20    ReplicaDivergence         no
//	21    OffsetRegression          no
//	22    ControllerUnavailable     yes
//	23    BrokerNotAvailable        yes
//	24    StorageFailed             no
//	25    InvalidReplicationFactor  no
//	26    ShuttingDown              yes
//	27    StampMismatch             no
//	28    NotReady                  yes  not done yet (a leader not yet in touch with a follower, a topic not yet served)
//	29    Busy                      yes  refused before it was carried out
//	30    UnknownTopicID            yes  the broker may not know the topic yet
//	31    DuplicateBroker           no
//	32    BrokerAlive               no
//	33    StaleMetadata             no
//	34    UnknownBroker             no
//	35    NoSpace                   yes  space may come back
//	36    InvalidConfig             no   a topic configuration key or value refused
//	37    NotCoordinator            yes  after looking the group's coordinator up again
//	38    CoordinatorLoading        yes  the coordinator is rebuilding its groups
//	39    UnknownMember             no   the member joins again
//	40    FencedMember              no   a request from a member's past
//	41    IllegalGeneration         no   a partition the member does not own
//	42    FencedInstanceId          no   a static instance id in use by a live member
//	43    GroupNotEmpty             no
//	44    InvalidOffset             no
//	45    UnknownGroup              no
//	46    InvalidGroupName          no
//	47    Unauthenticated           no
//	48    Unauthorized              no
//	49    TLSMismatch               no
//	50    OutOfOrderSequence        no
//	51    InvalidProducerEpoch      no
//	52    InconsistentGroupProtocol no
//	53    GroupSubscribedToTopic    no
//
// A code this package does not know is named "Code<n>"; its Error keeps the
// retriable flag it came with.
//
// # Server and its limits
//
// A Server calls its Handler for the requests of one connection one at a
// time, in the order they arrived, and runs the Reply each returns
// concurrently with later requests: order-sensitive work is done in
// Handle, waiting in the Reply. So a pipelining client keeps its order
// without waiting for each answer. A Reply runs on a goroutine of its own,
// but for a lone request (none other in flight on the connection, no byte
// of another read) of an API its Handler answers here (AnswerHerer: a
// node's Produce and Replicate), which runs on the goroutine that read it:
// a new goroutine wakes an idle thread to take it, and a synchronous
// producer's round trip paid that wake-up on every record. Until it is
// answered the connection's next request is not read, so a Reply that goes
// on to wait for other nodes says so first (WaitingOnOthers), and reading
// goes on on another goroutine. Its limits (ServerConfig; gostream-node
// sets them from its flags):
//
//   - One size limit: a request frame may be FrameLimit of the batch limit
//     (MaxBatchBytes plus FrameAllowance). A larger one is read, discarded
//     and answered MessageTooLarge, and the connection goes on. A length
//     under FrameHeaderSize or over 1 GiB, or first bytes that look like
//     TLS or HTTP, are not a frame: the connection is closed, and the log
//     line names TLS or HTTP when it saw them.
//     A response that would pass the limit is answered MessageTooLarge.
//   - Request memory: request bodies, what Replies reserve and response
//     frames not yet written count against a budget per connection
//     (ConnMemoryBytes, default two frames: past it the server stops
//     reading that connection, so TCP slows that client alone) and one per
//     server (MemoryBytes, DefaultMemoryBytes: past it a request waits up
//     to MemoryWait, a second, then is refused unread with Busy). An eighth
//     more is kept for requests of at most 64 KiB, so that metadata and
//     small writes are served while large ones fill the budget.
//   - At most MaxInFlight requests (256) of one connection served at once;
//     the server reads no more until one is answered. A request whose
//     Reply waits for an event (Request.Waits: a long poll) holds one of
//     MaxWaiting slots (1024) instead, so that long polls never hold up
//     the other requests of their connection, nor leave it silent until
//     a call on it times out and the connection is presumed dead.
//   - Connections: at most MaxConns in all (DefaultMaxConns) and
//     MaxConnsPerAddr from one IP address (DefaultMaxConnsPerAddr); one over
//     a limit is closed at once. ConnLimiter and LimitListener apply the
//     same limits to another listener (a node's HTTP one).
//   - Deadlines: the rest of a frame is due ReadTimeout (30 s) after its
//     first byte, each response write has WriteTimeout (30 s), and a
//     connection with nothing in flight is closed after IdleTimeout
//     (DefaultIdleTimeout, two minutes; a long poll in flight is not idle).
//
// A connection that proved a principal (a verified client certificate, an
// accepted token) keeps the Credential it proved it with, in Sessions: one
// opened when it authenticates and closed when it ends, nothing per
// request. Server.Recheck asks ServerConfig.Recheck again about each (a
// node does after it reloads its tokens file or CA) and closes, at once,
// those whose credential no longer stands; one a certificate proved is
// closed at the certificate's NotAfter. A request in flight on it is not
// answered, as when the server closes; the client, dialing again, is
// refused when it authenticates. A node's HTTP front end keeps the
// Credentials of its long-lived responses in Sessions too.
//
// Bad input closes that connection with a logged reason; it never stops the
// server. A panic in a handler is a bug of ours: it is logged with its stack
// and answered Unknown, and the server goes on. Close is idempotent and
// waits for every goroutine the server started. RefuseRPCOnHTTP wraps a
// node's HTTP listener so that a gostream client that dials it by mistake is
// answered at once with an HTTP 400 that names the RPC address.
//
// # Invariants
//
//   - No decoder allocates on a length or count it has not checked
//     against the bytes left, and none leaves a byte unread: a body
//     decodes exactly, or fails with ErrMalformed.
//   - A response reaches only the call of its correlation id, and every
//     call ends: with its answer, its connection's close, or its deadline.
//   - Nothing is sent twice by this package unless it provably was not
//     sent (ErrNotSent) or its API is Idempotent (Pool.Call).
//   - A Server hands one connection's requests to its Handler one at a
//     time, in the order they arrived; what a request and its answer
//     hold counts against the connection's and the server's memory.
//   - Bad input ends its connection, never the server; a panic in a
//     Handler or Reply is answered Unknown; Close is idempotent and
//     returns once every goroutine the server started has.
//   - A code's number, name and retriable flag never change, and errors
//     of one code match each other under errors.Is on both sides.
package transport
