import Dispatch
import Subscriptions
import Testing

/// Guarantee 13: typed topics share the name space of plain names. A `Topic<P>` subscriber
/// receives every post of that name whose payload is a `P` (typed posts, and plain posts whose
/// data is a `P`); a plain subscriber receives a `PostObject` for every post of the name, the
/// typed payload readable through `payload(as:)`.
@Suite("Guarantee 13: topics share the name space of plain names")
struct Guarantee13TopicsShareNames {
    @Test(.tags(.pin)) func topicSubscriberReceivesTypedPosts() {
        let center = PostCenter()
        let seen = Recorder<String>()
        let token = center.subscribe(.login) { user in seen.append(user.name) }
        let ann = User("ann")
        #expect(center.post(.login, ann) == 1)
        #expect(center.post(Topic<User>("topic.login"), User("bob")) == 1)
        #expect(seen.values == ["ann", "bob"])
        withExtendedLifetime(token) {}
    }

    /// A `Topic<PostObject>` posts envelopes: posting one through it is posting it by name, so a
    /// plain subscriber receives that very envelope (not another one wrapping it), flag and
    /// sender included.
    @Test(.tags(.pin)) func anEnvelopePostedThroughATopicOfEnvelopesReachesPlainSubscribersAsItself() {
        let center = PostCenter()
        let seen = Recorder<PostObject>()
        let token = center.subscribe("topic.envelopes") { post in seen.append(post) }
        let sent = PostObject(flag: "sso", data: User("ann"))
        #expect(center.post(Topic<PostObject>("topic.envelopes"), sent) == 1)
        #expect(seen.values.count == 1)
        #expect(seen.values.first === sent)
        #expect(seen.values.first?.flag == "sso")
        withExtendedLifetime(token) {}
    }

    @Test(.tags(.pin)) func topicSubscriberReceivesPlainPostsWhoseDataIsItsPayloadType() {
        let center = PostCenter()
        let seen = Recorder<String>()
        let token = center.subscribe(.login) { user in seen.append(user.name) }
        let ann = User("ann")
        let dog = Dog("rex")
        #expect(center.post("topic.login", PostObject(flag: "sso", data: ann)) == 1)
        #expect(center.post("topic.login", flag: "pw", data: ann) == 1)
        // Not a User, or no data at all: not delivered, not counted.
        #expect(center.post("topic.login", flag: "dog", data: dog) == 0)
        #expect(center.post("topic.login", flag: "none") == 0)
        #expect(seen.values == ["ann", "ann"])
        withExtendedLifetime((token, ann, dog)) {}
    }

    @Test(.tags(.pin)) func plainSubscriberReceivesEveryPostOfTheNameWithTheTypedPayloadReadable() {
        let center = PostCenter()
        let seen = Recorder<String>()
        let token = center.subscribe("topic.login") { post in
            seen.append("\(post.flag):\(post.payload(as: User.self)?.name ?? "-")")
        }
        let ann = User("ann")
        #expect(center.post(.login, ann) == 1)
        #expect(center.post("topic.login", flag: "plain", data: ann) == 1)
        #expect(center.post("topic.login", flag: "empty") == 1)
        #expect(center.post(Topic<Int>("topic.login"), 42) == 1)
        #expect(seen.values == [":ann", "plain:ann", "empty:-", ":-"])
        withExtendedLifetime((token, ann)) {}
    }

    @Test(.tags(.pin)) func topicSubscriberIgnoresTypedPostsOfAnotherPayloadType() {
        let center = PostCenter()
        let ints = Recorder<Int>()
        let strings = Recorder<String>()
        let intToken = center.subscribe(Topic<Int>("shared")) { ints.append($0) }
        let stringToken = center.subscribe(Topic<String>("shared")) { strings.append($0) }
        #expect(center.post(Topic<Int>("shared"), 1) == 1)
        #expect(center.post(Topic<String>("shared"), "a") == 1)
        #expect(center.post(Topic<Double>("shared"), 2.5) == 0)
        #expect(center.post(Topic<Int>("shared"), 2) == 1)
        #expect(ints.values == [1, 2])
        #expect(strings.values == ["a"])
        #expect(center.subscriptionCount(for: "shared") == 2)
        withExtendedLifetime((intToken, stringToken)) {}
    }

    @Test(.tags(.pin)) func topicOfASuperclassReceivesPostsOfASubclassPayload() {
        let center = PostCenter()
        let seen = Recorder<String>()
        let animals = center.subscribe(Topic<Animal>("pets")) { seen.append("animal:\($0.name)") }
        let dogs = center.subscribe(Topic<Dog>("pets")) { seen.append("dog:\($0.name)") }
        let rex = Dog("rex")
        let cat = Animal("tom")
        #expect(center.post(Topic<Dog>("pets"), rex) == 2)
        #expect(center.post(Topic<Animal>("pets"), cat) == 1)
        #expect(center.post(Topic<Animal>("pets"), rex) == 2)
        #expect(center.post("pets", flag: "", data: rex) == 2)
        #expect(
            seen.values == ["animal:rex", "dog:rex", "animal:tom", "animal:rex", "dog:rex", "animal:rex", "dog:rex"])
        withExtendedLifetime((animals, dogs, rex, cat)) {}
    }

    @Test(.tags(.pin)) func registeredObserversOfATopicReceiveTypedAndMatchingPlainPosts() {
        final class Screen {
            let seen = Recorder<String>()
            func didLogin(_ user: User) { seen.append(user.name) }
        }
        let center = PostCenter()
        let screen = Screen()
        let token = center.register(.login, observer: screen, selector: Screen.didLogin)
        let ann = User("ann")
        #expect(center.post(.login, ann) == 1)
        #expect(center.post("topic.login", flag: "", data: ann) == 1)
        #expect(center.post("topic.login", flag: "") == 0)
        #expect(screen.seen.values == ["ann", "ann"])
        withExtendedLifetime((token, ann)) {}
    }

    @Test(.tags(.pin)) func queuedTopicSubscriberReceivesTypedPayloadsInPostOrder() {
        let center = PostCenter()
        let queue = makeSerialQueue("topic.queued")
        let seen = Recorder<Point>()
        let token = center.subscribe(Topic<Point>("pt"), delivery: .queue(queue)) { seen.append($0) }
        for i in 0..<20 { #expect(center.post(Topic<Point>("pt"), Point(x: i, y: -i)) == 1) }
        #expect(center.post(Topic<Int>("pt"), 0) == 0)
        queue.sync {}
        #expect(seen.values == (0..<20).map { Point(x: $0, y: -$0) })
        withExtendedLifetime(token) {}
    }

    @Test(.tags(.pin)) func topicsWithTheSameNameAreEqualAndHashTheSame() {
        #expect(Topic<Int>("a") == Topic<Int>("a"))
        #expect(Topic<Int>("a") != Topic<Int>("b"))
        #expect(Topic<Int>("a").name == "a")
        let set: Set<Topic<Int>> = [Topic("a"), Topic("a"), Topic("b")]
        #expect(set.count == 2)
    }

    @Test(.tags(.pin)) func typedAndPlainSubscriptionsOfANameAreCountedTogether() {
        let center = PostCenter()
        var tokens = Set<Subscription>()
        center.subscribe(.login) { _ in }.store(in: &tokens)
        center.subscribe(Topic<Int>("topic.login")) { _ in }.store(in: &tokens)
        center.subscribe("topic.login") { _ in }.store(in: &tokens)
        #expect(center.subscriptionCount(for: "topic.login") == 3)
        #expect(center.subscriptionCount(for: Topic<User>.login.name) == 3)
    }
}

extension Topic where Payload == User {
    fileprivate static let login = Topic("topic.login")
}
