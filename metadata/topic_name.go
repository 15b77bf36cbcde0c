package metadata

import (
	"errors"
	"fmt"
	"regexp"
)

// ErrInvalidTopicName means a name the cluster does not allow for a topic
// (nor for a consumer group, which follows the same rule).
var ErrInvalidTopicName = errors.New("metadata: invalid topic name")

// InternalPrefix begins the names of the cluster's internal topics
// (__consumer_offsets): no client creates, deletes, seals, alters or
// produces to them.
const InternalPrefix = "__"

// topicNameRE is the set of topic names the cluster allows.
var topicNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)

// ValidateTopicName reports whether name may be used as a topic name: 1 to
// 249 of [A-Za-z0-9._-], not . or .. (Kafka's rule). Such a name is also
// one directory name, which is what package storage makes of it under its
// root. It returns an error wrapping ErrInvalidTopicName when it may not.
func ValidateTopicName(name string) error {
	if name == "." || name == ".." || !topicNameRE.MatchString(name) {
		return fmt.Errorf("%w: %q (want 1 to 249 of [A-Za-z0-9._-], not . or ..)", ErrInvalidTopicName, name)
	}
	return nil
}
