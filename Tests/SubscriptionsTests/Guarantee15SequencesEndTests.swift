import Subscriptions
import Testing

/// Guarantee 15: a `Posts` sequence finishes once its center is gone (after yielding what it
/// buffered), in every buffering policy.
///
/// A regression here would leave a `for await` loop waiting forever, so the suite has a time
/// limit: a deadlock guard, not a timing assertion.
@Suite("Guarantee 15: a Posts sequence finishes when its center is gone", .timeLimit(.minutes(1)))
struct Guarantee15SequencesEnd {
    @Test(
        .tags(.pin),
        arguments: [
            (PostsBufferingPolicy.unbounded, [1, 2, 3]), (.bufferingNewest(2), [2, 3]), (.bufferingOldest(2), [1, 2]),
            (.bufferingNewest(0), []), (.bufferingOldest(0), []),
        ])
    func typedSequenceYieldsItsBufferThenFinishesWhenTheCenterDeinitialises(
        policy: PostsBufferingPolicy, expected: [Int]
    ) async {
        var center: PostCenter? = PostCenter()
        weak var weakCenter: PostCenter?
        weakCenter = center
        let numbers = center!.posts(count, bufferingPolicy: policy)
        for i in 1...3 { center!.post(count, i) }
        center = nil
        #expect(weakCenter == nil, "the sequence must not keep its center alive")
        var seen: [Int] = []
        for await n in numbers { seen.append(n) }
        #expect(seen == expected)
    }

    @Test(.tags(.pin), arguments: [PostsBufferingPolicy.unbounded, .bufferingNewest(2), .bufferingOldest(2)])
    func plainSequenceYieldsItsBufferThenFinishesWhenTheCenterDeinitialises(policy: PostsBufferingPolicy) async {
        var center: PostCenter? = PostCenter()
        let posts = center!.posts("async.end.plain", bufferingPolicy: policy)
        center!.post("async.end.plain", flag: "a")
        center!.post("async.end.plain", flag: "b")
        center = nil
        var flags: [String] = []
        for await post in posts { flags.append(post.flag) }
        #expect(flags == ["a", "b"])
    }

    @Test(.tags(.pin), arguments: [PostsBufferingPolicy.unbounded, .bufferingNewest(1), .bufferingOldest(1)])
    func suspendedConsumerFinishesWhenTheCenterDeinitialises(policy: PostsBufferingPolicy) async {
        var center: PostCenter? = PostCenter()
        let numbers = center!.posts(count, bufferingPolicy: policy)
        let (acks, ack) = AsyncStream<Void>.makeStream()
        let consumer = Task {
            var seen: [Int] = []
            for await n in numbers {
                seen.append(n)
                ack.yield()  // then back into next(), where it waits
            }
            return seen
        }
        center!.post(count, 7)
        var ackIterator = acks.makeAsyncIterator()
        await ackIterator.next()
        center = nil  // the consumer is waiting in next(), or about to: either way it finishes
        #expect(await consumer.value == [7])
    }

    @Test(.tags(.pin)) func iteratorKeepsReturningNilAfterTheCenterWent() async {
        var center: PostCenter? = PostCenter()
        let numbers = center!.posts(count)
        center = nil
        var iterator = numbers.makeAsyncIterator()
        #expect(await iterator.next() == nil)
        #expect(await iterator.next() == nil)
    }
}

private let count = Topic<Int>("async.end.count")
