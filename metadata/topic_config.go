package metadata

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gostream/storage"
)

// ErrInvalidConfig means a topic configuration key that does not exist, or
// a value that a key does not take. The error names the key.
var ErrInvalidConfig = errors.New("metadata: invalid topic config")

// The topic configuration keys, with Kafka's names and meanings. Every
// value is an integer.
const (
	// ConfigRetentionBytes is how much a partition keeps, in bytes:
	// retention deletes its oldest segments while the rest still hold at
	// least this much. -1 keeps any amount.
	ConfigRetentionBytes = "retention.bytes"
	// ConfigRetentionMs is how long a partition keeps records, in
	// milliseconds: retention deletes a segment once its newest record is
	// older. -1 keeps them forever.
	ConfigRetentionMs = "retention.ms"
	// ConfigSegmentBytes is the size, in bytes, at which a partition's
	// active segment rolls (a batch larger than it gets a segment of its
	// own). Retention deletes whole segments, so it is also how finely
	// retention works.
	ConfigSegmentBytes = "segment.bytes"
	// ConfigSegmentMs is the age, in milliseconds, at which a partition's
	// active segment rolls (at the next append): the oldest records of a
	// partition that is little written to wait at most this long past
	// retention.ms to be deleted.
	ConfigSegmentMs = "segment.ms"
)

// Bounds of the topic configuration values.
const (
	// MinSegmentBytes is the smallest segment.bytes: smaller segments
	// would mean a file (and an open descriptor) for every few batches.
	MinSegmentBytes = 1 << 20
	// MaxSegmentBytes is the largest segment.bytes (storage's limit).
	MaxSegmentBytes = storage.MaxSegmentBytes
	// MinSegmentMs is the smallest segment.ms: a segment a second at most.
	MinSegmentMs = 1000
	// MaxMs is the largest value of a key in milliseconds (about 292
	// years): the longest time.Duration.
	MaxMs = math.MaxInt64 / int64(time.Millisecond)
)

// LogConfig is a complete log configuration, every key with a value: a
// node's defaults, or what a topic's replicas run with (a TopicConfig over
// the defaults).
type LogConfig struct {
	RetentionBytes int64 // retention.bytes; -1 unlimited
	RetentionMs    int64 // retention.ms; -1 forever
	SegmentBytes   int64 // segment.bytes
	SegmentMs      int64 // segment.ms
}

// TopicConfig is the configuration a topic sets for itself, by key
// (ConfigRetentionBytes, ...). A key it does not set takes the node's
// default (LogConfig). Nil sets nothing.
type TopicConfig map[string]int64

// configKey is one key: its LogConfig field, which values it takes, and
// what a valid value looks like, for errors.
type configKey struct {
	name  string
	field func(*LogConfig) *int64
	valid func(v int64) bool
	want  string
}

// configKeys are sorted by name.
var configKeys = []configKey{
	{ConfigRetentionBytes, func(c *LogConfig) *int64 { return &c.RetentionBytes },
		func(v int64) bool { return v == -1 || v > 0 },
		"want -1 (unlimited) or a positive number of bytes"},
	{ConfigRetentionMs, func(c *LogConfig) *int64 { return &c.RetentionMs },
		func(v int64) bool { return v == -1 || v > 0 && v <= MaxMs },
		fmt.Sprintf("want -1 (forever) or a positive number of milliseconds, at most %d", MaxMs)},
	{ConfigSegmentBytes, func(c *LogConfig) *int64 { return &c.SegmentBytes },
		func(v int64) bool { return v >= MinSegmentBytes && v <= MaxSegmentBytes },
		fmt.Sprintf("want a number of bytes from %d (1 MiB) to %d (1 GiB)", MinSegmentBytes, MaxSegmentBytes)},
	{ConfigSegmentMs, func(c *LogConfig) *int64 { return &c.SegmentMs },
		func(v int64) bool { return v >= MinSegmentMs && v <= MaxMs },
		fmt.Sprintf("want a number of milliseconds from %d (1 s) to %d", MinSegmentMs, MaxMs)},
}

// ConfigWant says what a valid value of key looks like ("want -1
// (unlimited) or a positive number of bytes"), or "" for an unknown key.
func ConfigWant(key string) string {
	k, err := lookupKey(key)
	if err != nil {
		return ""
	}
	return k.want
}

// ConfigKeys returns the topic configuration keys, sorted.
func ConfigKeys() []string {
	keys := make([]string, len(configKeys))
	for i, k := range configKeys {
		keys[i] = k.name
	}
	return keys
}

func lookupKey(key string) (configKey, error) {
	for _, k := range configKeys {
		if k.name == key {
			return k, nil
		}
	}
	return configKey{}, fmt.Errorf("%w: unknown key %q: the keys are %s", ErrInvalidConfig, key, strings.Join(ConfigKeys(), ", "))
}

// CheckConfigKey returns an error matching ErrInvalidConfig, naming the
// key and the keys there are, if key is not a topic configuration key.
func CheckConfigKey(key string) error {
	_, err := lookupKey(key)
	return err
}

// CheckConfig returns an error matching ErrInvalidConfig, naming the key,
// if key is not a topic configuration key or value is not one it takes.
func CheckConfig(key string, value int64) error {
	k, err := lookupKey(key)
	if err != nil {
		return err
	}
	if !k.valid(value) {
		return fmt.Errorf("%w: %s %d: %s", ErrInvalidConfig, key, value, k.want)
	}
	return nil
}

// ParseConfig reads one KEY=VALUE entry, as the command line gives it, and
// checks it (CheckConfig). Its errors match ErrInvalidConfig and name the
// key.
func ParseConfig(entry string) (key string, value int64, err error) {
	key, text, ok := strings.Cut(entry, "=")
	key, text = strings.TrimSpace(key), strings.TrimSpace(text)
	if !ok || key == "" {
		return "", 0, fmt.Errorf("%w: %q: want KEY=VALUE, with KEY one of %s", ErrInvalidConfig, entry, strings.Join(ConfigKeys(), ", "))
	}
	k, err := lookupKey(key)
	if err != nil {
		return "", 0, err
	}
	value, perr := strconv.ParseInt(text, 10, 64)
	if perr != nil {
		return "", 0, fmt.Errorf("%w: %s %q: not a number; %s", ErrInvalidConfig, key, text, k.want)
	}
	if err := CheckConfig(key, value); err != nil {
		return "", 0, err
	}
	return key, value, nil
}

// Validate checks every key and value, in key order; the first that is
// invalid gives an error matching ErrInvalidConfig that names it.
func (c TopicConfig) Validate() error {
	for _, key := range slices.Sorted(maps.Keys(c)) {
		if err := CheckConfig(key, c[key]); err != nil {
			return err
		}
	}
	return nil
}

// Clone returns a copy of c that shares nothing with it.
func (c TopicConfig) Clone() TopicConfig {
	return maps.Clone(c)
}

// Over returns defaults with the keys c sets replaced by c's values.
// Unknown keys are ignored (Validate refuses them).
func (c TopicConfig) Over(defaults LogConfig) LogConfig {
	out := defaults
	for _, k := range configKeys {
		if v, ok := c[k.name]; ok {
			*k.field(&out) = v
		}
	}
	return out
}

// Get returns the value of key, and false for a key that does not exist.
func (c LogConfig) Get(key string) (int64, bool) {
	k, err := lookupKey(key)
	if err != nil {
		return 0, false
	}
	return *k.field(&c), true
}

// Validate checks every value (CheckConfig), in key order.
func (c LogConfig) Validate() error {
	for _, k := range configKeys {
		if err := CheckConfig(k.name, *k.field(&c)); err != nil {
			return err
		}
	}
	return nil
}

// Policy is the storage policy of a log with this configuration: segments
// roll at SegmentBytes or SegmentMs, and retention keeps RetentionBytes
// and RetentionMs (off where they are -1).
func (c LogConfig) Policy() storage.Policy {
	p := storage.Policy{
		SegmentBytes: c.SegmentBytes,
		SegmentAge:   time.Duration(c.SegmentMs) * time.Millisecond,
	}
	if c.RetentionBytes > 0 {
		p.RetentionBytes = c.RetentionBytes
	}
	if c.RetentionMs > 0 {
		p.RetentionAge = time.Duration(c.RetentionMs) * time.Millisecond
	}
	return p
}
