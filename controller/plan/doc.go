// Package plan computes the moves of `gostream-ctl cluster rebalance` and
// `broker decommission`: pure functions from the cluster metadata and the
// partitions' sizes to a transport.MovePlan, which `partition reassign
// --plan` carries out (docs/reassignment.md, "Placement and planning").
// It moves nothing and asks nothing of the network; the controller gives
// it the metadata, the sizes its brokers report and the brokers that
// answer.
//
// Every plan it returns keeps these promises, whatever the input:
//
//   - a planned replica list has as many replicas as the partition's list
//     has now, each a distinct registered broker, and every broker it adds
//     is one of Input.Targets (the brokers that answer);
//   - a partition being moved (metadata.Partition.Move) is never planned:
//     it is left out and a note says so;
//   - a partition's replicas never cover fewer racks after the plan than
//     before it;
//   - a plan lists only partitions whose replica list changes, and a
//     cluster already balanced by the goals below gives an empty plan.
//
// # Rebalance
//
// Rebalance evens out, in this order of priority, over the brokers
// replicas may move to (and over the topics asked for, all by default):
//
//  1. Rack spread. A partition with two replicas in one rack while a
//     rack it has none in has a broker to take one gets one moved there
//     (a follower first, from the broker that holds the most).
//  2. Replicas per broker. While one broker holds two replicas more than
//     another, one of its replicas moves there: of a partition the other
//     does not hold, whose racks the move keeps, one that does not leave
//     the two brokers' leaders further apart, then the one with the
//     fewest bytes to copy that keeps both brokers' bytes within half the
//     tolerance below of what their replicas would hold at the mean
//     replica size (or the one that comes nearest, when none does). So
//     a broker added to a cluster takes small partitions while its bytes
//     allow, and its share of bytes in the end.
//  3. Preferred leaders per broker (the first replica of each list).
//     Only lists are reordered, which copies nothing: while one broker
//     is the first of two lists more than another, leadership shifts
//     along the shortest chain of partitions from the one to the other
//     (each link moves one partition's first place to another of its
//     replicas). The moves for replica counts prefer those that keep
//     leaders as even, and those for bytes make no other.
//  4. Bytes per broker. While two brokers' bytes differ by more than a
//     tenth of their mean (and at least MinByteSpread), a replica moves
//     from the one with more to the other when their replica counts allow
//     it, or two swap places, whichever brings the two closest without
//     leaving their leaders further apart; the pair furthest apart first,
//     then others when racks leave that one nothing to move. A move that
//     would not bring them closer is not made.
//
// The steps run in the order racks, replica counts, bytes, leaders: the
// reordering comes last, as the moves before it change which broker
// leads what.
//
// Each step moves only while it improves what it evens out, so the plan
// has no more moves than its goals need; a partition moved by several
// steps is one move, from its list now to its list at the end. A step
// changes what the others see (which partitions a broker holds, which it
// leads), so the four run again, in order, until none moves anything:
// the cluster a plan leaves is one Rebalance plans nothing for. They end,
// because every move gains on the racks, or keeps them and lowers the
// spread of the replica counts, or keeps both and lowers the spread of
// the bytes, or keeps the three and lowers the spread of the leaders.
//
// # Decommission
//
// Decommission of broker N replaces N in every list that holds it by a
// broker that the list does not hold: one in a rack the partition's other
// replicas are not in first, then the one that holds the fewest replicas
// (counting the plan so far), then the fewest bytes, then the lowest id;
// the largest partitions are placed first. N's place keeps its role: a
// follower's place gets the new broker, and where N is first, one of the
// partition's other replicas (the one that leads the fewest lists) becomes
// first and the new broker takes its place, so that leadership goes to a
// replica that holds the log rather than an empty one. It refuses
// (ErrNotEnoughBrokers), naming the partitions, when one of them cannot
// keep its replica count with the brokers left.
//
// # Cost
//
// Each step is a greedy loop over the partitions a broker holds;
// planning 2,000 partitions of three replicas over nine brokers, three
// of them new, takes about a tenth of a second (docs/benchmarks.md).
package plan
